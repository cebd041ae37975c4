// The operation-queue names next to Foundation, Dispatch, Synchronization and
// the standard library: if any collided, this file would not compile. Both
// operation queues are used side by side, unqualified.
import Dispatch
import Foundation
import Synchronization
import Testing
import SwiftQueues

@Suite struct ProcedureNameCollisionTests {
    @Test func operationQueueNamesAreUsableUnqualifiedNextToFoundation() throws {
        let procedure: Procedure = BlockProcedure {}
        let block: BlockProcedure = BlockProcedure {}
        let invocation: InvocationProcedure<Int, Int> = InvocationProcedure(argument: 1) { $0 + 1 }
        let queue: ProcedureQueue = ProcedureQueue(name: "collision")
        let event: ProcedureEvent = .finished
        let error: ProcedureError = .cancelled
        let priority: Procedure.QueuePriority = .high
        let state: Procedure.State = procedure.state
        let observation: ProcedureObservation = procedure.addObserver { _, _ in }
        procedure.removeObserver(observation)
        block.queuePriority = priority
        queue.addProcedures([procedure, block, invocation], waitUntilFinished: true)

        // Foundation's, in the same scope.
        let operation: Operation = BlockOperation {}
        let operationQueue: OperationQueue = OperationQueue()
        operationQueue.addOperations([operation], waitUntilFinished: true)

        #expect(event == .finished && error == .cancelled && state == .ready)
        #expect(operation.isFinished && procedure.isFinished)
        #expect(try invocation.result == 2)
    }
}
