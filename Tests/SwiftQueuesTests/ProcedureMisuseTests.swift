// Programmer errors of procedures and procedure queues:
// each runs in a child process (an exit test) and must stop it with one
// line on stderr that names the call and the procedure.

import Testing
import SwiftQueues

/// The child's stderr as text.
private func errorText(_ result: ExitTest.Result?) -> String {
    String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
}

@Suite struct ProcedureMisuseTests {
    @Test("start() on a procedure that is not ready")
    func startWhenNotReady() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let a = BlockProcedure {}
            a.name = "A"
            let b = BlockProcedure {}
            b.name = "B"
            b.addDependency(a)
            b.start()
        }
        #expect(errorText(result).contains(
            "SwiftQueues: Procedure.start(): 'B' is not ready (1 unfinished dependency)"))
    }

    @Test("start() twice")
    func startTwice() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let procedure = BlockProcedure {}
            procedure.name = "twice"
            procedure.start()
            procedure.start()
        }
        #expect(errorText(result).contains(
            "SwiftQueues: Procedure.start(): 'twice' has already finished; it cannot start again"))
    }

    @Test("start() after a cancelled procedure finished")
    func startAfterCancelledFinish() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let procedure = BlockProcedure {}
            procedure.name = "cancelled"
            procedure.cancel()
            procedure.start()  // finishes it without running
            procedure.start()
        }
        #expect(errorText(result).contains("'cancelled' has already finished (it was cancelled)"))
    }

    @Test("An asynchronous procedure started while it executes")
    func markExecutingTwice() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            final class Async: Procedure, @unchecked Sendable {
                override var isAsynchronous: Bool { true }
                override func start() { markExecuting() }
            }
            let procedure = Async()
            procedure.name = "async"
            procedure.start()
            procedure.start()
        }
        #expect(errorText(result).contains(
            "Procedure.markExecuting(): 'async' was started twice (it is already executing)"))
    }

    @Test("Setting a completion block on a finished procedure")
    func completionBlockAfterFinish() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let procedure = BlockProcedure {}
            procedure.name = "done"
            procedure.start()
            procedure.completionBlock = {}
        }
        #expect(errorText(result).contains(
            "SwiftQueues: Procedure.completionBlock: 'done' has already finished"))
    }

    @Test("Setting a completion block on an executing procedure")
    func completionBlockWhileExecuting() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            final class SelfConfiguring: Procedure, @unchecked Sendable {
                override func main() { completionBlock = {} }
            }
            let procedure = SelfConfiguring()
            procedure.name = "running"
            procedure.start()
        }
        #expect(errorText(result).contains("Procedure.completionBlock: 'running' has already started"))
    }

    @Test("addExecutionBlock after start")
    func addExecutionBlockAfterStart() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let procedure = BlockProcedure {}
            procedure.name = "blocks"
            procedure.start()
            procedure.addExecutionBlock {}
        }
        #expect(errorText(result).contains(
            "SwiftQueues: BlockProcedure.addExecutionBlock: 'blocks' has already finished"))
    }

    @Test("start() on a procedure that is in a queue")
    func startWhileEnqueued() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let queue = ProcedureQueue(name: "held")
            queue.isSuspended = true
            let procedure = BlockProcedure {}
            procedure.name = "queued"
            queue.addProcedure(procedure)
            procedure.start()
        }
        #expect(errorText(result).contains(
            "SwiftQueues: Procedure.start(): 'queued' is in a ProcedureQueue; the queue starts it"))
    }

    @Test("A cycle of two is reported, naming both")
    func cycleOfTwo() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let a = BlockProcedure {}
            a.name = "A"
            let b = BlockProcedure {}
            b.name = "B"
            a.addDependency(b)
            b.addDependency(a)
        }
        #expect(errorText(result).contains(
            "SwiftQueues: Procedure.addDependency: dependency cycle: 'B' -> 'A' -> 'B' "
                + "(each waits for the next; 2 procedures would never run)"))
    }

    @Test("A cycle of three is reported, naming all three in order")
    func cycleOfThree() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let a = BlockProcedure {}
            a.name = "A"
            let b = BlockProcedure {}
            b.name = "B"
            let c = BlockProcedure {}
            c.name = "C"
            a.addDependency(b)
            b.addDependency(c)
            let queue = ProcedureQueue(name: "cycle")
            queue.addProcedure(a)
            queue.addProcedure(b)
            c.addDependency(a)  // closes A -> B -> C -> A
        }
        #expect(errorText(result).contains(
            "dependency cycle: 'C' -> 'A' -> 'B' -> 'C' (each waits for the next; 3 procedures would never run)"))
    }

    @Test func dependingOnItself() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let a = BlockProcedure {}
            a.name = "self"
            a.addDependency(a)
        }
        #expect(errorText(result).contains("'self' cannot depend on itself"))
    }

    @Test func finishTwice() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            final class Async: Procedure, @unchecked Sendable {
                override var isAsynchronous: Bool { true }
            }
            let procedure = Async()
            procedure.name = "finish"
            procedure.start()
            procedure.finish()
            procedure.finish()
        }
        #expect(errorText(result).contains("SwiftQueues: Procedure.finish(): 'finish' finished twice"))
    }

    @Test func addingAProcedureTwice() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let queue = ProcedureQueue(name: "twice")
            queue.isSuspended = true
            let procedure = BlockProcedure {}
            procedure.name = "dup"
            queue.addProcedure(procedure)
            ProcedureQueue(name: "other").addProcedure(procedure)
        }
        #expect(errorText(result).contains(
            "SwiftQueues: ProcedureQueue.addProcedure: 'dup' is already in a ProcedureQueue"))
    }

    @Test func addingAFinishedProcedure() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let procedure = BlockProcedure {}
            procedure.name = "old"
            procedure.start()
            ProcedureQueue(name: "late").addProcedure(procedure)
        }
        #expect(errorText(result).contains("SwiftQueues: ProcedureQueue.addProcedure: 'old' has already finished"))
    }

    @Test func addingADependencyAfterStart() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let procedure = BlockProcedure {}
            procedure.name = "started"
            procedure.start()
            procedure.addDependency(BlockProcedure {})
        }
        #expect(errorText(result).contains(
            "Procedure.addDependency: 'started' has already finished; add dependencies before it starts"))
    }

    @Test func invalidMaxConcurrentCount() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = ProcedureQueue(name: "bad", maxConcurrentCount: -2)
        }
        #expect(errorText(result).contains("ProcedureQueue.maxConcurrentCount: -2 is not a valid count"))
    }

    @Test func retargetingTheMainQueue() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            ProcedureQueue.main.underlyingQueue = nil
        }
        #expect(errorText(result).contains("the main ProcedureQueue always runs on the main queue"))
    }
}
