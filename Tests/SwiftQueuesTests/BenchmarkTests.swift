#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Testing
import SwiftQueues

@Suite struct BenchmarkTests {
    @Test func zeroIterationsIsZeroAndRunsNothing() {
        var calls = 0
        #expect(benchmark(iterations: 0) { calls += 1 } == 0)
        #expect(calls == 0)
    }

    @Test func runsTheBodyOncePerIteration() {
        var calls = 0
        _ = benchmark(iterations: 10_000) { calls += 1 }
        #expect(calls == 10_000)
    }

    @Test func cheapBodyMeasuresCheap() {
        let counter = AtomicCounter()
        let ns = benchmark(iterations: 100_000) { counter.increment() }
        #expect(counter.load() == 100_000)
        // An atomic increment is nanoseconds; allow a loaded machine and
        // sanitizers plenty of room.
        #expect(ns < 100_000)
    }

    @Test func sleepingBodyMeasuresAtLeastTheSleep() {
        let ns = benchmark(iterations: 20) { usleep(200) }
        #expect(ns >= 190_000)  // usleep sleeps at least 200 µs
        #expect(ns < 1_000_000_000)
    }
}
