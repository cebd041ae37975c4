// Every SwiftQueues type, used unqualified next to Foundation, Dispatch,
// Synchronization and the standard library: if any name collided, this file
// would not compile.
import Foundation
import Dispatch
import Synchronization
import Testing
import SwiftQueues

@Suite struct NameCollisionTests {
    @Test func everyTypeIsUsableUnqualified() {
        let counter: AtomicCounter = AtomicCounter(1)
        let ordering: AtomicCounter.Ordering = .relaxed
        counter.increment(ordering: ordering)

        let lock: SpinLock = SpinLock()
        _ = lock.withLock { counter.add(1) }

        let once: OnceToken = OnceToken()
        once.run { counter.add(10) }

        let stack: LockFreeStack<Int> = LockFreeStack<Int>()
        stack.push(1)
        let queue: LockFreeQueue<Int> = LockFreeQueue<Int>()
        queue.push(2)

        let ns: UInt64 = benchmark(iterations: 10) { _ = counter.load() }

        // The queue API.
        let workQueue: WorkQueue = WorkQueue(label: "collision", attributes: WorkQueue.Attributes.concurrent)
        let priority: WorkQueue.Priority = .background
        let global: WorkQueue = WorkQueue.global(priority)
        let group: WorkGroup = WorkGroup()
        let semaphore: CountingSemaphore = CountingSemaphore(value: 0)
        let item: WorkItem = WorkItem(flags: WorkItem.Flags.barrier) { counter.add(100) }
        let key: SpecificKey<Int> = SpecificKey<Int>()
        let deadline: WorkDeadline = WorkDeadline.now() + Duration.milliseconds(1)
        let predicate: WorkQueue.Predicate = .notOnQueue(workQueue)
        workQueue.setSpecific(key, value: 1)
        workQueue.async(group: group) { semaphore.signal() }
        workQueue.async(execute: item)
        global.async(group: group) {}
        WorkQueue.precondition(predicate)
        let waited: WaitResult = semaphore.wait(timeout: .distantFuture)
        item.wait()
        group.wait()
        let specific = workQueue.sync { WorkQueue.getSpecific(key) }
        #expect(waited == .success)
        #expect(specific == 1)

        // Sources, delayed submission and timers.
        let timerSource: TimerSource = TimerSource(flags: TimerSource.Flags.strict, queue: workQueue)
        timerSource.schedule(deadline: .now(), repeating: nil, leeway: .zero)
        let dataSource: DataSource = DataSource(kind: DataSource.Kind.add, queue: workQueue)
        let eventSource: EventSource = dataSource
        let stream: AsyncStream<UInt> = eventSource.events
        _ = stream
        let fsEvents: FileSystemSource.Events = .all
        let procEvents: ProcessSource.Events = .exit
        let sourceError: SourceError = SourceError(errnoCode: EBADF, sourceType: "read")
        let readSource: ReadSource? = try? ReadSource(fileDescriptor: -1)
        let writeSource: WriteSource? = try? WriteSource(fileDescriptor: -1)
        let signalSource: SignalSource? = try? SignalSource(signal: SIGKILL)
        // (A pid with no process is not an error: it reports .exit.)
        let processSource: ProcessSource? = try? ProcessSource(processIdentifier: getpid(),
                                                               eventMask: [.exit, .fork])
        let fileSystemSource: FileSystemSource? = try? FileSystemSource(fileDescriptor: -1, eventMask: fsEvents)
        #expect(readSource == nil && writeSource == nil && signalSource == nil)
        #expect(processSource == nil && fileSystemSource == nil)
        #expect(procEvents == .exit && sourceError.errnoCode == EBADF)
        timerSource.activate()
        timerSource.cancel()
        dataSource.activate()
        dataSource.cancel()
        let later: WorkItem = workQueue.asyncAfter(delay: Duration.milliseconds(1)) {}
        later.cancel()
        let repeating: RepeatingTimer = RepeatingTimer(interval: .seconds(1), queue: workQueue) { _ in }
        repeating.invalidate()
        let foundationTimer = Timer(timeInterval: 1, repeats: false) { _ in }
        foundationTimer.invalidate()
        let dispatchTimer = DispatchSource.makeTimerSource()
        dispatchTimer.activate()
        dispatchTimer.cancel()
        #expect(deadline < WorkDeadline.distantFuture)

        // Data and I/O.
        let buffer: DataBuffer = DataBuffer(bytes: [1, 2, 3]) + DataBuffer()
        let region: DataBuffer.Region? = buffer.regions.first
        let deallocator: DataBuffer.Deallocator = .free
        let ioError: IOError = IOError(errnoCode: EBADF)
        let ioKind: IOChannel.Kind = .stream
        let channel: IOChannel = IOChannel(kind: ioKind, fileDescriptor: -1)
        let sharing: IOChannel = IOChannel(kind: ioKind, channel: channel)
        sharing.close()
        channel.close()
        let chunk: IOChannel.Chunk = IOChannel.Chunk(isDone: true, data: buffer, error: ioError)
        let foundationData = Data(buffer)
        let dispatchData = DispatchData.empty
        let fileHandle = FileHandle.standardError
        _ = fileHandle
        if case .free = deallocator {} else { Issue.record("deallocator") }
        #expect(foundationData.count == 3 && dispatchData.isEmpty)
        #expect(chunk.isDone && region?.offset == 0 && chunk.error?.errnoCode == EBADF)

        // Tracing.
        let recording: Bool = WorkTrace.isRecording
        let traceError: TraceError = TraceError(errnoCode: EBUSY)
        #expect(traceError.errnoCode == EBUSY || recording)
        // Introspection.
        let snapshot: RuntimeSnapshot = RuntimeSnapshot.capture()
        let queueInfo: RuntimeSnapshot.QueueInfo? = snapshot.queues.first
        let queueKind: RuntimeSnapshot.QueueInfo.Kind? = queueInfo?.kind
        let sourceInfos: [RuntimeSnapshot.SourceInfo] = snapshot.sources
        let channelInfos: [RuntimeSnapshot.ChannelInfo] = snapshot.channels
        let threadInfos: [RuntimeSnapshot.ThreadInfo] = snapshot.threads
        let poolInfo: RuntimeSnapshot.PoolInfo = snapshot.pool
        let thread = Thread.current
        _ = thread
        #expect(queueKind == .main && poolInfo.width >= 1)
        #expect(sourceInfos.count >= 0 && channelInfos.count >= 0 && threadInfos.isEmpty)

        // The neighbours, in the same scope.
        let mutex = Mutex(0)
        mutex.withLock { $0 += 1 }
        let atomic = Atomic<Int>(0)
        atomic.add(1, ordering: .relaxed)
        let nsLock = NSLock()
        nsLock.withLock { _ = stack.pop() }
        DispatchQueue(label: "collision-test").sync { _ = queue.pop() }
        let duration: Duration = .seconds(1)
        let dispatchGroup = DispatchGroup()
        let dispatchSemaphore = DispatchSemaphore(value: 1)
        dispatchSemaphore.wait()
        dispatchSemaphore.signal()
        DispatchQueue.global().async(group: dispatchGroup) {}
        dispatchGroup.wait()
        let dispatchItem = DispatchWorkItem {}
        dispatchItem.perform()
        let operationQueue = OperationQueue()
        operationQueue.addOperation {}
        operationQueue.waitUntilAllOperationsAreFinished()
        let dispatchTimeout: DispatchTimeoutResult = dispatchGroup.wait(timeout: .now())
        #expect(dispatchTimeout == .success)

        #expect(counter.load() == 113)
        #expect(stack.isEmpty && queue.isEmpty)
        #expect(ns < 1_000_000_000)
        #expect(mutex.withLock { $0 } == 1)
        #expect(atomic.load(ordering: .relaxed) == 1)
        #expect(duration == .seconds(1))
    }
}
