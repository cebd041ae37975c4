// The async reads follow their task: cancelling the awaiting task stops
// `channel.read()` and `IOChannel.read(fileDescriptor:)` with ECANCELED,
// and the caller picks the queue the read completes on. Every wait is
// bounded (a broken cancellation fails, it does not hang).

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Testing
import SwiftQueues

/// An async read in its own task. The tests are async and never block a
/// thread of the cooperative pool, which the read's task needs.
private final class ReadTask: Sendable {
    private let ended = SpinLocked(false)
    let task: Task<Result<[UInt8], IOError>, Never>

    init(_ body: @escaping @Sendable () async throws(IOError) -> DataBuffer) {
        let ended = self.ended
        task = Task {
            defer { ended.withLock { $0 = true } }
            do throws(IOError) {
                return .success(Array(try await body()))
            } catch {
                return .failure(error)
            }
        }
    }

    /// Whether the task has ended (without waiting).
    var hasEnded: Bool { ended.withLock { $0 } }

    /// The outcome, or nil if the task has not ended within `seconds`
    /// (then the test fails instead of hanging).
    func outcome(within seconds: Int = 10) async -> Result<[UInt8], IOError>? {
        let pending = SpinLocked<CheckedContinuation<Result<[UInt8], IOError>?, Never>?>(nil)
        return await withCheckedContinuation { continuation in
            pending.withLock { $0 = continuation }
            Task { [task] in
                let result = await task.value
                pending.withLock { $0.take() }?.resume(returning: result)
            }
            Task {
                try? await Task.sleep(for: .seconds(seconds))
                pending.withLock { $0.take() }?.resume(returning: nil)
            }
        }
    }
}

/// A short pause that leaves the thread to others.
private func pause(_ milliseconds: Int) async {
    try? await Task.sleep(for: .milliseconds(milliseconds))
}

private let cancelled = IOError(errnoCode: ECANCELED)

/// Writes `bytes` to `fd` and reads them back from `readEnd` directly: the
/// descriptor is the caller's again and nothing is still reading it.
private func roundTrip(_ bytes: [UInt8], write fd: Int32, read readEnd: Int32) -> [UInt8] {
    writeAll(fd, bytes)
    var buffer = [UInt8](repeating: 0, count: 64)
    let n = buffer.withUnsafeMutableBytes { read(readEnd, $0.baseAddress, $0.count) }
    return n < 0 ? [] : Array(buffer[0..<n])
}

@Suite struct IOChannelAsyncTests {
    /// A read waiting on an empty pipe ends with ECANCELED when its task is
    /// cancelled; the stop reaches the channel (its cleanup runs) and
    /// bytes written afterwards are still in the pipe.
    @Test func cancellingChannelReadStopsIt() async {
        let (readEnd, writeEnd) = makePipe()
        defer { close(readEnd); close(writeEnd) }
        let cleanups = CleanupLog()
        let channel = IOChannel(kind: .stream, fileDescriptor: readEnd) { cleanups.record($0) }
        let reader = ReadTask { () async throws(IOError) -> DataBuffer in
            try await channel.read(length: 10)
        }
        await pause(50)
        #expect(!reader.hasEnded)  // nothing to read: still waiting
        reader.task.cancel()
        #expect(await reader.outcome() == .failure(cancelled))
        #expect(cleanups.waitRan())
        #expect(roundTrip([1, 2, 3], write: writeEnd, read: readEnd) == [1, 2, 3])
    }

    /// A task cancelled before it calls read gets ECANCELED at once.
    @Test func channelReadInACancelledTask() async {
        let (readEnd, writeEnd) = makePipe()
        defer { close(readEnd); close(writeEnd) }
        writeAll(writeEnd, [9, 9, 9])
        let cleanups = CleanupLog()
        let channel = IOChannel(kind: .stream, fileDescriptor: readEnd) { cleanups.record($0) }
        let reader = ReadTask { () async throws(IOError) -> DataBuffer in
            withUnsafeCurrentTask { $0?.cancel() }
            return try await channel.read(length: 3)
        }
        #expect(await reader.outcome() == .failure(cancelled))
        #expect(cleanups.waitRan())
        #expect(roundTrip([1], write: writeEnd, read: readEnd) == [9, 9, 9, 1])  // nothing was read
    }

    /// The one-shot read: cancelling stops it, it throws ECANCELED only
    /// once the descriptor is given back (blocking again, as it was), and
    /// the cancelled read consumed nothing written afterwards.
    @Test func cancellingOneShotReadStopsIt() async {
        let (readEnd, writeEnd) = makePipe()
        defer { close(readEnd); close(writeEnd) }
        let reader = ReadTask { () async throws(IOError) -> DataBuffer in
            try await IOChannel.read(fileDescriptor: readEnd)
        }
        await pause(50)
        #expect(!reader.hasEnded)
        reader.task.cancel()
        #expect(await reader.outcome() == .failure(cancelled))
        #expect(fcntl(readEnd, F_GETFL) & O_NONBLOCK == 0)
        #expect(roundTrip([4, 5, 6, 7], write: writeEnd, read: readEnd) == [4, 5, 6, 7])
    }

    /// Both reads complete on the queue the caller gives: while it is
    /// suspended, a finished read does not return.
    @Test func readsCompleteOnTheCallersQueue() async {
        let queue = WorkQueue(label: "read-completions")
        let (readEnd, writeEnd) = makePipe()
        defer { close(readEnd) }
        writeAll(writeEnd, [1, 2, 3, 4])
        close(writeEnd)

        queue.suspend()
        let oneShot = ReadTask { () async throws(IOError) -> DataBuffer in
            try await IOChannel.read(fileDescriptor: readEnd, length: 2, queue: queue)
        }
        await pause(100)
        #expect(!oneShot.hasEnded)  // the read is done; its handler waits for the queue
        queue.resume()
        #expect(await oneShot.outcome() == .success([1, 2]))

        let cleanups = CleanupLog()
        let channel = IOChannel(kind: .stream, fileDescriptor: readEnd) { cleanups.record($0) }
        queue.suspend()
        let viaChannel = ReadTask { () async throws(IOError) -> DataBuffer in
            try await channel.read(queue: queue)
        }
        await pause(100)
        #expect(!viaChannel.hasEnded)
        queue.resume()
        #expect(await viaChannel.outcome() == .success([3, 4]))
        channel.close()
        #expect(cleanups.waitRan())
    }
}
