#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Testing
import SwiftQueues

@Suite struct OnceTokenTests {
    @Test func eightRacingThreadsRunTheBodyExactlyOnce() {
        let threads = 8
        let token = OnceToken()
        let executions = AtomicCounter()
        let configuration = UnsafeBox([String: Int]())
        let seen = (0..<threads).map { _ in UnsafeBox(0) }
        let gate = StartGate(parties: threads)

        onThreads(threads) { index in
            gate.arriveAndWait()
            token.run {
                executions.increment()
                usleep(2_000)  // late arrivals must wait, not run it too
                configuration.value["answer"] = 42  // plain write, published by the token
            }
            seen[index].value = configuration.value["answer"] ?? -1
        }

        #expect("Executed \(executions.load()) time(s)" == "Executed 1 time(s)")
        #expect(seen.allSatisfy { $0.value == 42 })
    }

    @Test func laterCallsDoNothing() {
        let token = OnceToken()
        var runs = 0
        for _ in 0..<5 {
            token.run { runs += 1 }  // a non-escaping, non-Sendable closure
        }
        #expect(runs == 1)
    }

    @Test func tokensAreIndependent() {
        let first = OnceToken()
        let second = OnceToken()
        var log: [String] = []
        first.run { log.append("first") }
        second.run { log.append("second") }
        first.run { log.append("first again") }
        #expect(log == ["first", "second"])
    }
}
