// Classic GCD usage examples in Swift over SwiftQueues, each checked
// against its exact output: closures and captures, context through every
// submission form, UI work on the main queue, sync on a concurrent queue, a
// download then display, a file of random numbers made once, once and a
// singleton, group notify, a private serial queue. The delayed-submission
// examples are in TimerTests.swift.
//
// Substitutions: UIKit output becomes log lines; "the main queue" of the
// examples that only need *a* serial UI queue is a serial stand-in queue,
// because the test runner does not run on the process's main thread and
// WorkQueue.main only runs while the main thread drains it.

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Foundation
import Testing
import SwiftQueues

@Suite struct UsageExampleTests {
    // MARK: - Block objects

    /// Closures as methods, functions and values.
    @Test func constructingClosures() {
        // `subtract` as a function value (a C function or a block in C).
        let subtract: (Int, Int) -> Int = { value, from in from - value }
        #expect(subtract(10, 30) == 20)

        let intToString: (Int) -> String = { String($0) }
        #expect("string = \(intToString(10))" == "string = 10")

        typealias IntToStringConverter = (Int) -> String
        func convert(_ integer: Int, using converter: IntToStringConverter) -> String {
            converter(integer)
        }
        let inlineConverter: IntToStringConverter = { "\($0)" }
        let results = [
            convert(123, using: intToString),          // standalone
            convert(123, using: inlineConverter),      // inline typed
            convert(123, using: { "\($0)" }),          // literal argument
        ]
        // Run through a queue, as such closures are meant to be.
        let queue = WorkQueue(label: "com.example.blocks")
        let lines = queue.sync { results.map { "result = \($0)" } }
        #expect(lines == ["result = 123", "result = 123", "result = 123"])
    }

    // MARK: - Variables in closures

    /// Swift captures variables by reference (the `__block`
    /// behaviour); a capture list copies (the plain-block behaviour).
    @Test func capturingVariables() {
        var log: [String] = []

        // independentBlockObject
        let independent = {
            var localInteger = 10
            log.append("local integer = \(localInteger)")
            localInteger = 20
            log.append("local integer = \(localInteger)")
        }
        independent()
        #expect(log == ["local integer = 10", "local integer = 20"])

        // simpleMethod with a comparator: read, then write, the outside variable.
        log = []
        var outsideVariable = 10
        var array = ["obj1", "obj2"]
        array.sort { _, _ in
            let insideVariable = 20
            log.append("Outside variable = \(outsideVariable)")
            log.append("Inside variable = \(insideVariable)")
            return false
        }
        #expect(log.first == "Outside variable = 10")
        #expect(log.contains("Inside variable = 20"))
        array.sort { _, _ in
            outsideVariable = 30
            return false
        }
        #expect("Outside variable = \(outsideVariable)" == "Outside variable = 30")

        // scopeTest: default capture (by reference) gives 20 / 20.
        log = []
        var integerValue = 10
        let byReference = { log.append("Integer value inside the block = \(integerValue)") }
        integerValue = 20
        byReference()
        log.append("Integer value outside the block = \(integerValue)")
        #expect(log == ["Integer value inside the block = 20",
                        "Integer value outside the block = 20"])

        // scopeTest with a capture list (a copy at creation) gives 10 / 20.
        log = []
        var copiedValue = 10
        let byCopy = { [copiedValue] in log.append("Integer value inside the block = \(copiedValue)") }
        copiedValue = 20
        byCopy()
        log.append("Integer value outside the block = \(copiedValue)")
        #expect(log == ["Integer value inside the block = 10",
                        "Integer value outside the block = 20"])
    }

    // MARK: - Calling closures

    /// One closure calling another.
    @Test func callingClosures() {
        let trimString: @Sendable (String) -> String = {
            $0.trimmingCharacters(in: .whitespaces)
        }
        let trimWithOtherBlock: @Sendable (String) -> String = { trimString($0) }
        let trimmed = WorkQueue.global().sync { trimWithOtherBlock("    O'Reilly    ") }
        #expect("Trimmed string = \(trimmed)" == "Trimmed string = O'Reilly")
    }

    // MARK: - Context through every submission form

    /// The context a closure captures arrives unchanged through every
    /// SwiftQueues submission form, and each runs the expected number of times.
    @Test func contextArrivesUnchanged() async {
        final class Sentinel: Sendable {}
        let sentinel = Sentinel()
        let hits = AtomicCounter(), mismatches = AtomicCounter()
        let check: @Sendable (Sentinel) -> Void = { received in
            hits.increment()
            if received !== sentinel { mismatches.increment() }
        }
        let queue = WorkQueue(label: "context", attributes: .concurrent)
        let group = WorkGroup()
        queue.async(group: group) { check(sentinel) }                    // async + group
        queue.asyncBarrier { check(sentinel) }                          // barrier async
        queue.sync { check(sentinel) }                                  // sync
        WorkQueue.concurrentPerform(iterations: 4) { _ in check(sentinel) }  // apply
        let item = WorkItem { check(sentinel) }
        queue.async(execute: item)                                      // work item
        item.wait()
        let notified = CountingSemaphore(value: 0)
        group.notify(queue: queue) {                                    // group notify
            check(sentinel)
            notified.signal()
        }
        let once = OnceToken()
        once.run { check(sentinel) }                                    // once
        once.run { check(sentinel) }
        await queue.run { check(sentinel) }                             // run
        await notified.wait()
        queue.syncBarrier {}
        #expect(hits.load() == 11)
        #expect(mismatches.load() == 0)
    }

    // MARK: - UI work on the main queue

    /// The alert data reaches the UI queue intact (a closure, and
    /// the `_f` form's owned context, freed by the callee).
    @Test func alertOnTheUIQueue() {
        let ui = WorkQueue(label: "main.standin")
        let log = EventLog()

        // (a) the closure carries its data.
        let (title, message, button) = ("GCD", "GCD is amazing!", "OK")
        ui.async { log.log("title=\(title) message=\(message) button=\(button)") }

        // (b) an owned context: allocated by the caller, freed by the callee.
        struct AlertViewData {
            var title: String
            var message: String
            var cancelButtonTitle: String
        }
        let context = UnsafeMutablePointer<AlertViewData>.allocate(capacity: 1)
        context.initialize(to: AlertViewData(title: "GCD", message: "GCD is amazing.",
                                             cancelButtonTitle: "OK"))
        nonisolated(unsafe) let owned = context
        ui.async {
            let data = owned.move()
            owned.deallocate()
            log.log("title=\(data.title) message=\(data.message) button=\(data.cancelButtonTitle)")
        }
        ui.sync {}
        #expect(log.lines == ["title=GCD message=GCD is amazing! button=OK",
                              "title=GCD message=GCD is amazing. button=OK"])
    }

    // MARK: - Synchronous work on a concurrent queue

    /// sync onto the global queue runs on the caller's
    /// thread, 1..1000 then 1..1000 in order.
    @Test func syncOnTheGlobalQueueRunsOnTheCallersThread() {
        let caller = currentThread()
        let log = EventLog()
        let otherThread = AtomicCounter()
        let printFrom1To1000: @Sendable () -> Void = {
            let thread = currentThread()
            if pthread_equal(thread, caller) == 0 { otherThread.increment() }
            for counter in 1...1000 {
                log.log("Counter = \(counter) - Thread = \(thread)")
            }
        }
        let concurrentQueue = WorkQueue.global(.default)
        concurrentQueue.sync(printFrom1To1000)
        concurrentQueue.sync(printFrom1To1000)
        let lines = log.lines
        #expect(lines.count == 2000)
        let counters = lines.map { Int($0.split(separator: " ")[2]) ?? -1 }
        #expect(counters == Array(1...1000) + Array(1...1000))
        #expect(otherThread.load() == 0)
    }

    // MARK: - Non-UI work asynchronously

    private enum Download {
        case image([UInt8])
        case failure(String)
        case empty
    }

    /// A sync "download" inside an async closure, then a sync hop to
    /// the UI queue; the nested sync onto the same global queue must not
    /// deadlock. Each of the three outcomes: an image, an error, no data.
    @Test(arguments: ["image", "error", "empty"])
    func downloadThenDisplay(outcome: String) {
        let ui = WorkQueue(label: "main.standin")
        let log = EventLog()
        let done = CountingSemaphore(value: 0)
        let concurrentQueue = WorkQueue.global()
        concurrentQueue.async {
            let image = UnsafeBox<[UInt8]?>(nil)
            concurrentQueue.sync {
                sleepMilliseconds(10)  // fakeDownload
                let result: Download = outcome == "image" ? .image([UInt8](repeating: 7, count: 1024))
                    : outcome == "error" ? .failure("timed out") : .empty
                switch result {
                case .image(let data): image.value = data
                case .failure(let error): log.log("Error happened = \(error)")
                case .empty: log.log("No data could get downloaded from the URL.")
                }
            }
            ui.sync {
                if let data = image.value {
                    log.log("image displayed (\(data.count) bytes)")
                } else {
                    log.log("Image isn't downloaded. Nothing to display.")
                }
            }
            done.signal()
        }
        #expect(done.wait(timeout: .now() + rendezvousTimeout) == .success)
        switch outcome {
        case "image":
            #expect(log.lines == ["image displayed (1024 bytes)"])
        case "error":
            #expect(log.lines == ["Error happened = timed out",
                                  "Image isn't downloaded. Nothing to display."])
        default:
            #expect(log.lines == ["No data could get downloaded from the URL.",
                                  "Image isn't downloaded. Nothing to display."])
        }
    }

    /// Generate the random-number file once, then read and sort it.
    @Test func randomNumbersFile() throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("swiftqueues-random-numbers-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let fileLocation = directory.appendingPathComponent("list.txt")
        let generated = AtomicCounter()

        @Sendable func run() -> [Int] {
            let ui = WorkQueue(label: "main.standin")
            let received = UnsafeBox<[Int]>([])
            let done = CountingSemaphore(value: 0)
            let concurrentQueue = WorkQueue.global()
            concurrentQueue.async {
                // Generate the file only if it is not there yet.
                concurrentQueue.sync {
                    guard !FileManager.default.fileExists(atPath: fileLocation.path) else { return }
                    generated.increment()
                    let numbers = (0..<10_000).map { _ in String(UInt32.random(in: 0...UInt32(RAND_MAX))) }
                    try? numbers.joined(separator: "\n").write(to: fileLocation, atomically: true, encoding: .utf8)
                }
                // Read it back and sort ascending.
                let sorted = concurrentQueue.sync { () -> [Int] in
                    let text = (try? String(contentsOf: fileLocation, encoding: .utf8)) ?? ""
                    return text.split(separator: "\n").compactMap { Int($0) }.sorted()
                }
                ui.async {
                    if !sorted.isEmpty { received.value = sorted }  // "refresh the table"
                    done.signal()
                }
            }
            _ = done.wait(timeout: .now() + rendezvousTimeout)
            return ui.sync { received.value }
        }

        let first = run()
        let modified = try FileManager.default.attributesOfItem(atPath: fileLocation.path)[.modificationDate] as? Date
        #expect(first.count == 10_000)
        #expect(first == first.sorted())
        #expect(first.allSatisfy { (0...Int(RAND_MAX)).contains($0) })
        let second = run()
        #expect(generated.load() == 1)  // the second run reused the file
        #expect(second == first)
        let modifiedAgain = try FileManager.default.attributesOfItem(atPath: fileLocation.path)[.modificationDate] as? Date
        #expect(modified == modifiedAgain)
    }

    // MARK: - Once

    /// Once ("Executed 1 time(s)"), and a singleton.
    @Test func runningOnlyOnce() {
        let numberOfEntries = AtomicCounter()
        let log = EventLog()
        let concurrentQueue = WorkQueue.global()
        let group = WorkGroup()
        let onceToken = OnceToken()
        let executedOnlyOnce: @Sendable () -> Void = {
            let entries = numberOfEntries.increment()
            log.log("Executed \(entries) time(s)")
        }
        onceToken.run { concurrentQueue.async(group: group, executedOnlyOnce) }
        onceToken.run { concurrentQueue.async(group: group, executedOnlyOnce) }
        group.wait()
        #expect(log.lines == ["Executed 1 time(s)"])

        let instances = (0..<16).map { _ in UnsafeBox<ObjectIdentifier?>(nil) }
        onThreads(16) { index in
            instances[index].value = ObjectIdentifier(MySingleton.sharedInstance())
        }
        #expect(Set(instances.map(\.value)).count == 1)
    }

    // MARK: - Grouping tasks

    /// Three reloads on the (stand-in) main queue,
    /// then the notification; the group is released right after `notify`.
    @Test(arguments: [false, true])
    func groupNotify(functionForm: Bool) {
        let mainQueue = WorkQueue(label: "main.standin")
        let log = EventLog()
        let finished = CountingSemaphore(value: 0)

        final class ViewController: Sendable {
            let log: EventLog
            init(log: EventLog) { self.log = log }
            func reloadTableView() { log.log("reloadTableView") }
            func reloadScrollView() { log.log("reloadScrollView") }
            func reloadImageView() { log.log("reloadImageView") }
        }
        let controller = ViewController(log: log)

        do {
            let taskGroup = WorkGroup()
            if functionForm {
                // The `_f` form: one function gets the controller as context.
                @Sendable func reloadAllComponents(_ context: ViewController) {
                    context.reloadTableView()
                    context.reloadScrollView()
                    context.reloadImageView()
                }
                mainQueue.async(group: taskGroup) { reloadAllComponents(controller) }
            } else {
                mainQueue.async(group: taskGroup) { controller.reloadTableView() }
                mainQueue.async(group: taskGroup) { controller.reloadScrollView() }
                mainQueue.async(group: taskGroup) { controller.reloadImageView() }
            }
            taskGroup.notify(queue: mainQueue) {
                log.log("Finished: All tasks are finished")
                finished.signal()
            }
        }  // dispatch_release(taskGroup)
        #expect(finished.wait(timeout: .now() + rendezvousTimeout) == .success)
        #expect(log.lines == ["reloadTableView", "reloadScrollView", "reloadImageView",
                              "Finished: All tasks are finished"])
    }

    // MARK: - Serial queues

    /// Three closures on a private serial queue, the
    /// queue released right after submitting: 15 lines in order, none on the
    /// main thread. Closure and named-function forms.
    @Test(arguments: [false, true])
    func serialQueueReleasedRightAfterSubmitting(functionForm: Bool) {
        let log = EventLog()
        let onMainThread = AtomicCounter()
        let finished = CountingSemaphore(value: 0)
        let released = CountingSemaphore(value: 0)

        @Sendable func iterate(_ name: String) {
            if Thread.isMainThread { onMainThread.increment() }
            for counter in 0..<5 {
                log.log("\(name) iteration, counter = \(counter)")
            }
        }
        @Sendable func firstIteration() { iterate("First") }
        @Sendable func secondIteration() { iterate("Second") }
        @Sendable func thirdIteration() {
            iterate("Third")
            finished.signal()
        }

        do {
            let firstSerialQueue = WorkQueue(label: "com.pixolity.GCD.serialQueue1")
            // Seen by the queue's last closure only: the Swift queue object
            // goes away right after submitting, the C queue lives on.
            let probe = DeinitProbe { released.signal() }
            if functionForm {
                firstSerialQueue.async(firstIteration)
                firstSerialQueue.async(secondIteration)
                firstSerialQueue.async(thirdIteration)
            } else {
                firstSerialQueue.async { iterate("First") }
                firstSerialQueue.async { iterate("Second") }
                firstSerialQueue.async {
                    iterate("Third")
                    finished.signal()
                }
            }
            firstSerialQueue.async { withExtendedLifetime(probe) {} }
        }  // dispatch_release(firstSerialQueue)
        #expect(finished.wait(timeout: .now() + rendezvousTimeout) == .success)
        #expect(released.wait(timeout: .now() + rendezvousTimeout) == .success)
        let expected = ["First", "Second", "Third"].flatMap { name in
            (0..<5).map { "\(name) iteration, counter = \($0)" }
        }
        #expect(log.lines == expected)
        #expect(onMainThread.load() == 0)
    }
}

/// A singleton built the classic way: a once token guarding a static
/// instance.
private final class MySingleton: Sendable {
    private static let onceToken = OnceToken()
    nonisolated(unsafe) private static var instance: MySingleton?  // written once, under the token

    static func sharedInstance() -> MySingleton {
        onceToken.run { instance = MySingleton() }
        return instance.unsafelyUnwrapped
    }
}
