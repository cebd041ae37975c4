// Nonsense arguments stop the process with one line
// `SwiftQueues: <call>: <what>`, in every build: each case as an exit test
// here (a debug build), and every case again from a release build of
// Tests/MisuseChecks, where Swift's `precondition` would say only
// "precondition failure". `make test` builds that program with
// `-c release` and names its folder in SWIFTQUEUES_RELEASE_CHECKS.

import Testing
import Foundation
import SwiftQueues

/// The child's stderr as text.
private func errorText(_ result: ExitTest.Result?) -> String {
    String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
}

/// Every case of MisuseChecks and the line it must print.
let misuseCases: [(mode: String, message: String)] = [
    ("semaphore-value", "SwiftQueues: CountingSemaphore(value:): negative value -1"),
    ("read-length", "SwiftQueues: IOChannel.read(offset:length:queue:handler:): negative length -1"),
    ("read-fd-length", "SwiftQueues: IOChannel.read(fileDescriptor:length:): negative length -1"),
    ("low-water", "SwiftQueues: IOChannel.setLowWater(_:): negative size -1"),
    ("io-interval", "SwiftQueues: IOChannel.setInterval(_:strict:): negative interval"),
    ("apply-iterations", "SwiftQueues: WorkQueue.concurrentPerform(iterations:): negative iteration count -1"),
    ("serial-executor", "SwiftQueues: WorkQueue.asUnownedSerialExecutor(): queue 'com.example.wide' is concurrent"),
    ("timer-interval",
     "SwiftQueues: TimerSource.schedule(deadline:repeating:leeway:): repeating interval -0.005 seconds is not positive"),
    ("timer-zero-interval",
     "SwiftQueues: TimerSource.schedule(deadline:repeating:leeway:): repeating interval 0.0 seconds is not positive"),
    ("timer-leeway", "SwiftQueues: TimerSource.schedule(deadline:repeating:leeway:): negative leeway"),
    ("repeating-timer-interval",
     "SwiftQueues: RepeatingTimer(interval:repeats:tolerance:): a repeating timer's interval 0.0 seconds is not positive"),
    ("repeating-timer-tolerance", "SwiftQueues: RepeatingTimer(interval:repeats:tolerance:): negative tolerance"),
    ("benchmark-iterations", "SwiftQueues: benchmark(iterations:): negative iteration count -1"),
    ("counter-bit", "SwiftQueues: AtomicCounter.testAndSetBit: bit 64 is out of range 0..<64"),
    ("buffer-index", "SwiftQueues: DataBuffer[_:]: index 3 is out of bounds 0..<3"),
    ("buffer-range", "SwiftQueues: DataBuffer.subdata(in:): range 2..<5 is out of bounds 0..<3"),
]

@Suite struct MisuseMessageTests {
    @Test func aSemaphoreWithANegativeValue() async {
        let result = await #expect(processExitsWith: .signal(SIGABRT), observing: [\.standardErrorContent]) {
            _ = CountingSemaphore(value: -1)
        }
        #expect(errorText(result).contains(misuseCases[0].message))
    }

    @Test func aReadOfNegativeLength() async {
        let result = await #expect(processExitsWith: .signal(SIGABRT), observing: [\.standardErrorContent]) {
            var fds: [Int32] = [0, 0]
            _ = pipe(&fds)
            IOChannel(kind: .stream, fileDescriptor: fds[0]).read(length: -1, queue: .global()) { _ in }
        }
        #expect(errorText(result).contains(misuseCases[1].message))
    }

    @Test func aNegativeIterationCount() async {
        let result = await #expect(processExitsWith: .signal(SIGABRT), observing: [\.standardErrorContent]) {
            WorkQueue.concurrentPerform(iterations: -1) { _ in }
        }
        #expect(errorText(result).contains(misuseCases[5].message))
    }

    @Test func aNegativeTimerInterval() async {
        let result = await #expect(processExitsWith: .signal(SIGABRT), observing: [\.standardErrorContent]) {
            TimerSource().schedule(deadline: .now(), repeating: .milliseconds(-5))
        }
        #expect(errorText(result).contains(misuseCases[7].message))
    }

    /// Dispatch takes a zero interval as 1 ns: a timer that fires as fast
    /// as it can for ever. Here it is a misuse (nil fires once).
    @Test func aZeroTimerInterval() async {
        let result = await #expect(processExitsWith: .signal(SIGABRT), observing: [\.standardErrorContent]) {
            TimerSource().schedule(deadline: .now(), repeating: .zero)
        }
        #expect(errorText(result).contains(misuseCases[8].message))
    }

    @Test func aNegativeTimerLeeway() async {
        let result = await #expect(processExitsWith: .signal(SIGABRT), observing: [\.standardErrorContent]) {
            TimerSource().schedule(deadline: .now(), repeating: .seconds(1), leeway: .milliseconds(-1))
        }
        #expect(errorText(result).contains(misuseCases[9].message))
    }

    @Test func aRepeatingTimerWithoutAnInterval() async {
        let result = await #expect(processExitsWith: .signal(SIGABRT), observing: [\.standardErrorContent]) {
            _ = RepeatingTimer(interval: .zero, queue: .global()) { _ in }
        }
        #expect(errorText(result).contains(misuseCases[10].message))
    }

    @Test func aNegativeTimerTolerance() async {
        let result = await #expect(processExitsWith: .signal(SIGABRT), observing: [\.standardErrorContent]) {
            _ = RepeatingTimer(interval: .seconds(1), tolerance: .seconds(-1), queue: .global()) { _ in }
        }
        #expect(errorText(result).contains(misuseCases[11].message))
    }

    @Test func aNegativeChannelInterval() async {
        let result = await #expect(processExitsWith: .signal(SIGABRT), observing: [\.standardErrorContent]) {
            var fds: [Int32] = [0, 0]
            _ = pipe(&fds)
            IOChannel(kind: .stream, fileDescriptor: fds[0]).setInterval(.milliseconds(-1))
        }
        #expect(errorText(result).contains(misuseCases[4].message))
    }

    @Test func anIndexPastTheEndOfABuffer() async {
        let result = await #expect(processExitsWith: .signal(SIGABRT), observing: [\.standardErrorContent]) {
            _ = DataBuffer(bytes: [1, 2, 3])[3]
        }
        #expect(errorText(result).contains(misuseCases[14].message))
    }

    /// Values that are not misuse: a one-shot timer with a zero interval,
    /// a zero tolerance, a delay of zero or less (at once), .zero intervals
    /// that turn a feature off.
    @Test func edgeValuesThatAreAllowed() async {
        let fired = AtomicCounter()
        let timer = RepeatingTimer.scheduled(interval: .zero, repeats: false, queue: .global()) { _ in
            fired.increment()
        }
        let ran = CountingSemaphore(value: 0)
        WorkQueue.global().asyncAfter(delay: .milliseconds(-5)) { ran.signal() }
        #expect(ran.wait(timeout: .now() + .seconds(10)) == .success)
        let deadline = ContinuousClock.now + .seconds(10)
        while fired.load() == 0 && ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(1)) }
        #expect(fired.load() == 1)
        #expect(!timer.isValid)
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        let readEnd = fds[0]
        let channel = IOChannel(kind: .stream, fileDescriptor: readEnd) { _ in close(readEnd) }
        channel.setInterval(.zero)
        channel.setLowWater(0)
        channel.close()
        close(fds[1])
    }

    /// Every case from a release build (-O), where `precondition` drops its
    /// message: the line must be there all the same.
    @Test(.enabled(if: ProcessInfo.processInfo.environment["SWIFTQUEUES_RELEASE_CHECKS"] != nil,
                   "set by `make test`, which builds Tests/MisuseChecks with -c release"),
          arguments: misuseCases.map(\.mode))
    func inAReleaseBuild(mode: String) throws {
        let folder = URL(fileURLWithPath: ProcessInfo.processInfo.environment["SWIFTQUEUES_RELEASE_CHECKS"]!)
        let text = try Self.expectMisuse(folder.appendingPathComponent("MisuseChecks"), mode)
        #expect(!text.contains("precondition failure"), "\(mode): \(text)")
    }

    /// The same cases from the debug build of MisuseChecks: the table and
    /// the program agree (the release run above uses both).
    @Test(arguments: misuseCases.map(\.mode))
    func inADebugBuild(mode: String) throws {
        let testBinary = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        _ = try Self.expectMisuse(testBinary.deletingLastPathComponent().appendingPathComponent("MisuseChecks"),
                                  mode)
    }

    /// Runs `program mode`, expects SIGABRT and the case's line on stderr;
    /// returns stderr.
    static func expectMisuse(_ program: URL, _ mode: String) throws -> String {
        let message = misuseCases.first { $0.mode == mode }!.message
        let process = Process()
        process.executableURL = program
        process.arguments = [mode]
        // No crash backtracer in the child: it starts a helper process at
        // the abort, which a ThreadSanitizer build's fork handling can fail
        // in, ending the child by another signal than the abort checked here.
        var environment = ProcessInfo.processInfo.environment
        environment["SWIFT_BACKTRACE"] = "enable=no"
        process.environment = environment
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let text = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationReason == .uncaughtSignal && process.terminationStatus == SIGABRT,
                "\(mode): \(text)")
        #expect(text.contains(message), "\(mode): \(text)")
        return text
    }
}
