//===----------------------------------------------------------------------===//
//
// SwiftQueues — BlockProcedure (NSBlockOperation) and InvocationProcedure
// (NSInvocationOperation: a function and its argument, with a result).
//
//===----------------------------------------------------------------------===//

import CSwiftQueues
import Synchronization

/// A procedure that runs one or more closures and finishes when all of them
/// have returned: SwiftQueues' `BlockOperation`.
///
///     let procedure = BlockProcedure { print("Beginning operation.") }
///     procedure.addExecutionBlock { work() }
///     queue.addProcedure(procedure)
///
/// With one block, `main()` calls it on the procedure's thread. With several,
/// they run **concurrently** (unlike Foundation on Linux, which runs them one
/// after another): the procedure's thread runs some and the pool's threads
/// the rest (`sq_apply_f`), in no particular order; the procedure finishes
/// when every block has returned. For ordered blocks, use one block or
/// dependencies. ``ProcedureQueue/current`` is the procedure's queue in
/// every block. ``Procedure/threadPriority`` applies to the procedure's own
/// thread only. Cancelling does not interrupt blocks: check
/// ``Procedure/isCancelled`` in them.
open class BlockProcedure: Procedure, @unchecked Sendable {
    /// The block given to `init(_:)`, if any (immutable: no lock to read it).
    private let firstBlock: (@Sendable () -> Void)?
    /// Blocks added later (rarely any), guarded by `blocksLock`.
    private var moreBlocks: [@Sendable () -> Void] = []
    private let blocksLock = ProcedureLockWord()
    /// Whether `moreBlocks` is non-empty (so `main()` of a one-block
    /// procedure takes no lock).
    private let hasMoreBlocks = Atomic<Bool>(false)

    /// Creates a procedure with no blocks (add them with
    /// ``addExecutionBlock(_:)``; with none it finishes without doing work).
    public override init() {
        firstBlock = nil
        super.init()
    }

    /// Creates a procedure that runs `block`.
    public init(_ block: @escaping @Sendable () -> Void) {
        firstBlock = block
        super.init()
    }

    /// Adds a block to run together with the others. Adding a block to a
    /// procedure that started or finished stops the process.
    public final func addExecutionBlock(_ block: @escaping @Sendable () -> Void) {
        let phase = ProcedureWord.phase(word.load(ordering: .acquiring))
        if phase != ProcedureWord.initial {
            procedureMisuse("BlockProcedure.addExecutionBlock: \(self) has already "
                + (phase == ProcedureWord.finished ? "finished" : "started")
                + "; add blocks before it starts")
        }
        blocksLock.lock()
        moreBlocks.append(block)
        blocksLock.unlock()
        hasMoreBlocks.store(true, ordering: .releasing)
    }

    /// The blocks, in the order they were given.
    public final var executionBlocks: [@Sendable () -> Void] {
        var all: [@Sendable () -> Void] = []
        if let firstBlock { all.append(firstBlock) }
        if hasMoreBlocks.load(ordering: .acquiring) {
            blocksLock.lock()
            all += moreBlocks
            blocksLock.unlock()
        }
        return all
    }

    /// Runs the blocks (concurrently when there are several) and returns
    /// when all have returned.
    open override func main() {
        if !hasMoreBlocks.load(ordering: .acquiring) {
            firstBlock?()
            return
        }
        let blocks = executionBlocks
        if blocks.count == 1 {
            blocks[0]()
            return
        }
        // Pool threads run some of the blocks: each block sees the queue
        // that started the procedure as `ProcedureQueue.current` (main on
        // the main thread), whichever thread runs it. The queue outlives
        // this call (its procedure is running), so no reference is taken.
        var context = BlockProcedureApply(
            blocks: blocks, queue: ProcedureQueue.current.map { Unmanaged.passUnretained($0) })
        withUnsafeMutablePointer(to: &context) { pointer in
            sq_apply_f(pointer.pointee.blocks.count, nil, UnsafeMutableRawPointer(pointer)) {
                raw, index in
                let context = raw.unsafelyUnwrapped.assumingMemoryBound(to: BlockProcedureApply.self)
                let thread = procedureThreadState()
                let saved = thread.pointee.currentQueue
                thread.pointee.currentQueue = context.pointee.queue
                context.pointee.blocks[index]()
                thread.pointee.currentQueue = saved
            }
        }
    }
}

/// What the iterations of a several-block `BlockProcedure.main()` share.
private struct BlockProcedureApply {
    let blocks: [@Sendable () -> Void]
    /// `ProcedureQueue.current` of the thread that called `main()`.
    let queue: Unmanaged<ProcedureQueue>?
}

/// A procedure that calls a function with an argument and keeps the result:
/// SwiftQueues' `NSInvocationOperation` (no selectors on Linux; pass a
/// function, or a method of a target).
///
///     let op = InvocationProcedure(argument: 123) { (n: Int) in n * 2 }
///     op.start()                 // runs on the calling thread
///     let value = try op.result  // 246
///
///     let op2 = InvocationProcedure(target: parser, action: Parser.parse, argument: data)
///
/// ``result`` throws ``ProcedureError/cancelled`` for a cancelled procedure
/// (Foundation raises `NSInvocationOperationCancelledException`) and
/// ``ProcedureError/notFinished`` before it has finished.
public final class InvocationProcedure<Argument: Sendable, Output: Sendable>: Procedure,
    @unchecked Sendable
{
    /// The argument the function is called with.
    public let argument: Argument
    private let function: @Sendable (Argument) -> Output
    /// Guarded by `outputLock`.
    private var output: Output?
    private let outputLock = ProcedureLockWord()

    /// Creates a procedure that calls `function(argument)`.
    public init(argument: Argument, _ function: @escaping @Sendable (Argument) -> Output) {
        self.argument = argument
        self.function = function
        super.init()
    }

    /// Creates a procedure that calls `action` on `target` with `argument`;
    /// `action` is an unapplied method reference such as `Parser.parse`.
    public convenience init<Target: Sendable>(
        target: Target,
        action: @escaping @Sendable (Target) -> @Sendable (Argument) -> Output,
        argument: Argument
    ) {
        self.init(argument: argument) { value in action(target)(value) }
    }

    /// Calls the function, unless the procedure was cancelled first.
    public override func main() {
        if isCancelled { return }
        let value = function(argument)
        outputLock.lock()
        output = value
        outputLock.unlock()
    }

    /// The function's return value. Throws ``ProcedureError/cancelled`` if
    /// the procedure was cancelled, ``ProcedureError/notFinished`` if it has
    /// not finished.
    public var result: Output {
        get throws(ProcedureError) {
            if isCancelled { throw .cancelled }
            guard isFinished else { throw .notFinished }
            outputLock.lock()
            let value = output
            outputLock.unlock()
            guard let value else { throw .notFinished }
            return value
        }
    }
}
