// Classic NSOperation examples ported to Procedure: CountingOperation (a
// synchronous operation that overrides start), SimpleOperation (asynchronous,
// without the usual version's shared-global bug), two invocation operations
// side by side, a dependency with its expected output, and performOperation
// (running an operation by hand when it is ready).

import CSwiftQueues
import Synchronization
import Testing
import SwiftQueues
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// `CountingOperation`. In the usual Objective-C version its "instance
/// variables" are globals (every instance shares one `taskIsFinished`);
/// here all state is per instance. It overrides start() without calling super, so it reports
/// executing and finished itself.
fileprivate final class CountingOperation: Procedure, @unchecked Sendable {
    let startingCount: Int
    let endingCount: Int
    let log: ProcLog
    private let taskIsFinished = Atomic<Bool>(false)

    /// The designated initializer.
    init(startingCount: Int, endingCount: Int, log: ProcLog) {
        self.startingCount = startingCount
        self.endingCount = endingCount
        self.log = log
        super.init()
    }

    /// `init` calls the designated initializer with (0, 1000).
    convenience init(log: ProcLog) {
        self.init(startingCount: 0, endingCount: 1000, log: log)
    }

    override func start() {
        if isCancelled {
            finish()  // publish isFinished = YES and return
            return
        }
        markExecuting()
        main()
    }

    override func main() {
        while !taskIsFinished.load(ordering: .relaxed) && !isCancelled {
            log.append("Main Thread = \(mainThread)")
            log.append("Current Thread = \(procThreadID())")
            for count in startingCount..<endingCount {
                log.append("Count = \(count)")
            }
            taskIsFinished.store(true, ordering: .relaxed)
        }
        finish()  // finished = YES, executing = NO
    }

    /// The thread the test started on (the example's "main thread").
    var mainThread: UInt = 0
}

/// `SimpleOperation`: asynchronous ("isConcurrent = YES"), with a
/// per-instance parameter object (the usual version prints 222 twice
/// because it keeps the object in a global).
fileprivate final class SimpleOperation: Procedure, @unchecked Sendable {
    let object: Int
    let log: ProcLog

    init(object: Int, log: ProcLog) {
        self.object = object
        self.log = log
        super.init()
    }

    convenience init(log: ProcLog) {
        self.init(object: 123, log: log)
    }

    override var isAsynchronous: Bool { true }

    override func start() {
        if isCancelled {
            finish()
            return
        }
        markExecuting()
        main()
    }

    override func main() {
        log.append("-[SimpleOperation main]")
        log.append("Parameter Object = \(object)")
        log.append("Current Thread = \(procThreadID())")
        finish()
    }
}

/// `performOperation:` — runs an operation by hand when it can;
/// returns false when it is not ready (retry later).
fileprivate func performOperation(_ procedure: Procedure) -> Bool {
    if procedure.isReady && !procedure.isCancelled {
        if !procedure.isAsynchronous {
            procedure.start()
        } else {
            procDetach { procedure.start() }
        }
        return true
    } else if procedure.isCancelled {
        // Move it to finished without running it, so it is never retried.
        procedure.start()
        return true
    }
    return false
}

@Suite struct ProcedureExampleTests {
    @Test("CountingOperation started by hand")
    func countingOperation() {
        let log = ProcLog()
        let operation = CountingOperation(startingCount: 0, endingCount: 1000, log: log)
        operation.mainThread = procThreadID()
        let events = ProcBox<[String]>([])
        operation.addObserver { procedure, event in
            events.update { $0.append("\(event): executing=\(procedure.isExecuting) finished=\(procedure.isFinished)") }
        }
        operation.start()
        log.append("Main thread is here")
        let lines = log.lines
        #expect(lines.count == 1003)
        #expect(lines[0] == "Main Thread = \(procThreadID())")
        #expect(lines[1] == "Current Thread = \(procThreadID())")  // the same thread
        #expect(Array(lines[2..<1002]) == (0..<1000).map { "Count = \($0)" })
        #expect(lines.last == "Main thread is here")
        #expect(events.value == ["executing: executing=true finished=false",
                                 "finished: executing=false finished=true"])
    }

    @Test("CountingOperation variants: cancelled first; the default range; two instances")
    func countingOperationVariants() {
        let cancelledLog = ProcLog()
        let cancelled = CountingOperation(log: cancelledLog)
        cancelled.cancel()
        cancelled.start()
        #expect(!cancelledLog.lines.contains { $0.hasPrefix("Count") })
        #expect(cancelled.isFinished && !cancelled.isExecuting)

        let defaultLog = ProcLog()
        let byDefault = CountingOperation(log: defaultLog)
        #expect(byDefault.startingCount == 0 && byDefault.endingCount == 1000)

        // Two instances on a queue at once: each counts its own range.
        let logA = ProcLog()
        let logB = ProcLog()
        let a = CountingOperation(startingCount: 0, endingCount: 10, log: logA)
        let b = CountingOperation(startingCount: 100, endingCount: 105, log: logB)
        let queue = ProcedureQueue(name: "counting")
        queue.addProcedures([a, b], waitUntilFinished: true)
        #expect(logA.lines.filter { $0.hasPrefix("Count") } == (0..<10).map { "Count = \($0)" })
        #expect(logB.lines.filter { $0.hasPrefix("Count") } == (100..<105).map { "Count = \($0)" })
    }

    @Test("Two invocation procedures run asynchronously, side by side")
    func twoInvocationProcedures() {
        final class Entries: Sendable {
            let log = ProcLog()
            let caller: UInt
            let rendezvous = ProcRendezvous(parties: 2)
            let met = ProcBox<[Bool]>([])
            init(caller: UInt) { self.caller = caller }
            func firstOperationEntry(_ object: Int) { entry("firstOperationEntry", object) }
            func secondOperationEntry(_ object: Int) { entry("secondOperationEntry", object) }
            private func entry(_ name: String, _ object: Int) {
                log.append("\(name) Parameter Object = \(object) onCaller = \(procThreadID() == caller)")
                let ok = rendezvous.arrive()
                met.update { $0.append(ok) }
            }
        }
        let entries = Entries(caller: procThreadID())
        let first = InvocationProcedure(target: entries, action: Entries.firstOperationEntry, argument: 111)
        let second = InvocationProcedure(target: entries, action: Entries.secondOperationEntry, argument: 222)
        let queue = ProcedureQueue(name: "invocations")
        let began = procNow()
        queue.addProcedure(first)
        queue.addProcedure(second)
        let addTime = procNow() - began
        entries.log.append("Main thread is here")
        queue.waitUntilAllFinished()
        // Adding does not wait for the procedures: a synchronous add would
        // block in the first one's rendezvous (up to 5 s) for the second.
        // The bound is loose for a loaded machine.
        #expect(addTime < 1.0)
        let lines = entries.log.lines.filter { $0 != "Main thread is here" }.sorted()
        #expect(lines == ["firstOperationEntry Parameter Object = 111 onCaller = false",
                          "secondOperationEntry Parameter Object = 222 onCaller = false"])
        #expect(entries.met.value == [true, true])  // they ran at the same time
    }

    @Test("SimpleOperation, two instances with their own parameters")
    func simpleOperation() {
        let log = ProcLog()
        let queue = ProcedureQueue(name: "simple")
        let a = SimpleOperation(object: 111, log: log)
        let b = SimpleOperation(object: 222, log: log)
        #expect(a.isConcurrent && b.isAsynchronous)
        queue.addProcedures([a, b], waitUntilFinished: true)
        let lines = log.lines
        #expect(lines.filter { $0 == "-[SimpleOperation main]" }.count == 2)
        #expect(Set(lines.filter { $0.hasPrefix("Parameter Object") })
            == ["Parameter Object = 111", "Parameter Object = 222"])
        #expect(!lines.contains("Current Thread = \(procThreadID())"))
        #expect(SimpleOperation(log: log).object == 123)
    }

    @Test("firstOperation depends on secondOperation")
    func dependencyExample() {
        let log = ProcLog()
        let secondOperation = InvocationProcedure(argument: 222) { (object: Int) in
            for _ in 0..<5 { log.append("Second Operation - Object = \(object)") }
        }
        let firstOperation = InvocationProcedure(argument: 111) { (object: Int) in
            for _ in 0..<5 { log.append("First Operation - Object = \(object)") }
        }
        firstOperation.addDependency(secondOperation)
        let queue = ProcedureQueue(name: "dependency")
        queue.addProcedure(firstOperation)
        queue.addProcedure(secondOperation)
        log.append("Main thread is here")
        queue.waitUntilAllFinished()
        let lines = log.lines.filter { $0 != "Main thread is here" }
        #expect(lines == Array(repeating: "Second Operation - Object = 222", count: 5)
            + Array(repeating: "First Operation - Object = 111", count: 5))
    }

    @Test("performOperation by hand")
    func performOperationByHand() {
        // (a) ready and synchronous: runs on this thread.
        let ranOn = ProcBox<UInt>(0)
        let synchronous = BlockProcedure { ranOn.value = procThreadID() }
        #expect(performOperation(synchronous))
        #expect(synchronous.isFinished)
        #expect(ranOn.value == procThreadID())

        // (b) ready and asynchronous: started on a new thread; returns at once.
        let asynchronous = SimpleOperation(object: 7, log: ProcLog())
        #expect(performOperation(asynchronous))
        asynchronous.waitUntilFinished()
        #expect(asynchronous.log.lines.contains("Parameter Object = 7"))

        // (c) cancelled: moved to finished without running.
        let mainRan = ProcBox(false)
        let cancelled = BlockProcedure { mainRan.value = true }
        cancelled.cancel()
        #expect(performOperation(cancelled))
        #expect(cancelled.isFinished && !mainRan.value)

        // (d) not ready: NO; retried from a timer (sq_after) once the
        // dependency has finished: YES.
        let dependency = BlockProcedure {}
        let waiting = BlockProcedure {}
        waiting.addDependency(dependency)
        #expect(!performOperation(waiting))
        dependency.start()
        final class Retry: @unchecked Sendable {
            let procedure: Procedure
            let result = ProcBox<Bool?>(nil)
            init(_ procedure: Procedure) { self.procedure = procedure }
        }
        let retry = Retry(waiting)
        sq_after_f(sq_time(SQ_TIME_NOW, 10 * Int64(NSEC_PER_MSEC)),
                   sq_get_global_queue(Int(SQ_QUEUE_PRIORITY_DEFAULT), 0),
                   Unmanaged.passRetained(retry).toOpaque()) { context in
            let retry = Unmanaged<Retry>.fromOpaque(context!).takeRetainedValue()
            retry.result.value = performOperation(retry.procedure)
        }
        #expect(procWaitUntil { retry.result.value != nil })
        #expect(retry.result.value == true)
        #expect(waiting.isFinished)
    }
}
