// IOChannel at the Swift level: a socket stream read with water marks and a
// strict interval, random access by path, a large write to a slow reader,
// the one-shot read and write, their async forms, and the errors (bad and
// write-only descriptors, a peer that goes away, closing with stop, bad
// paths). Rendezvous use semaphores with generous timeouts; nothing
// asserts on how the bytes were split into deliveries.

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Testing
import SwiftQueues

/// `count` bytes of a pattern that does not repeat at power-of-two periods.
func ioPattern(_ count: Int) -> [UInt8] {
    [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
        for i in 0..<count {
            buffer.initializeElement(at: i, to: UInt8(truncatingIfNeeded: (i &* 31) ^ (i >> 8)))
        }
        initialized = count
    }
}

/// Whether two large byte arrays are equal (memcmp: fast in debug builds).
func sameBytes(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    a.count == b.count && a.withUnsafeBytes { x in b.withUnsafeBytes { y in x.count == 0 || memcmp(x.baseAddress!, y.baseAddress!, x.count) == 0 } }
}

/// A new temporary file holding `bytes`; returns its absolute path.
func makeTemporaryFile(_ bytes: [UInt8]) -> String {
    var template = Array("/tmp/swiftqueues-io-XXXXXX".utf8CString)
    let fd = mkstemp(&template)
    precondition(fd >= 0, "mkstemp failed: \(errno)")
    writeAll(fd, bytes)
    close(fd)
    return String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// Writes every byte of `bytes` to the blocking descriptor `fd`.
func writeAll(_ fd: Int32, _ bytes: [UInt8]) {
    bytes.withUnsafeBytes { buffer in
        var done = 0
        while done < buffer.count {
            let n = write(fd, buffer.baseAddress! + done, buffer.count - done)
            precondition(n > 0 || errno == EINTR, "write failed: \(errno)")
            if n > 0 { done += n }
        }
    }
}

/// The bytes of the file at `path`.
func readFile(_ path: String) -> [UInt8] {
    let fd = open(path, O_RDONLY)
    precondition(fd >= 0)
    defer { close(fd) }
    var result: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n <= 0 { break }
        result += buffer[0..<n]
    }
    return result
}

/// A connected pair of Unix stream sockets.
func makeSocketPair() -> (Int32, Int32) {
    var fds: [Int32] = [0, 0]
    let rc = socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds)
    precondition(rc == 0, "socketpair failed: \(errno)")
    return (fds[0], fds[1])
}

/// A pipe: (read end, write end).
func makePipe() -> (Int32, Int32) {
    var fds: [Int32] = [0, 0]
    precondition(pipe(&fds) == 0, "pipe failed: \(errno)")
    return (fds[0], fds[1])
}

/// A descriptor number that is certainly not open (past the limit).
let closedDescriptor = Int32(getdtablesize()) + 10

/// The handler calls of one operation, in order, and a signal at the last.
final class ChunkLog: Sendable {
    private let lock = SpinLock()
    private let storage = UnsafeBox<[IOChannel.Chunk]>([])
    let done = CountingSemaphore(value: 0)

    func record(_ chunk: IOChannel.Chunk) {
        lock.withLock { storage.value.append(chunk) }
        if chunk.isDone { done.signal() }
    }

    var chunks: [IOChannel.Chunk] {
        lock.withLock { storage.value }
    }

    /// Every delivered byte, concatenated.
    var data: DataBuffer {
        chunks.reduce(DataBuffer()) { $0 + $1.data }
    }

    func waitDone() -> Bool {
        done.wait(timeout: .now() + rendezvousTimeout) == .success
    }
}

/// Counts cleanup calls and keeps their errors.
final class CleanupLog: Sendable {
    private let lock = SpinLock()
    private let storage = UnsafeBox<[IOError?]>([])
    let ran = CountingSemaphore(value: 0)

    func record(_ error: IOError?) {
        lock.withLock { storage.value.append(error) }
        ran.signal()
    }

    var errors: [IOError?] {
        lock.withLock { storage.value }
    }

    func waitRan() -> Bool {
        ran.wait(timeout: .now() + rendezvousTimeout) == .success
    }
}

@Suite struct IOChannelTests {
    /// A stream channel on a socket, low water 1, a strict 10 ms interval;
    /// the peer writes the 8 HTTP chunks 5 ms apart and closes. Exactly the
    /// 351 bytes arrive in order, the last call is done without error, the
    /// header parses, and after close the cleanup runs once, without error,
    /// leaving the descriptor as it found it.
    @Test func streamReadOfHTTPChunks() {
        let (mine, peer) = makeSocketPair()
        let queue = WorkQueue(label: "test.io.stream")
        let cleanups = CleanupLog()
        let channel = IOChannel(kind: .stream, fileDescriptor: mine, queue: queue) { cleanups.record($0) }
        #expect(channel.kind == .stream)
        #expect(channel.fileDescriptor == mine)
        channel.setLowWater(1)
        channel.setInterval(.milliseconds(10), strict: true)
        let log = ChunkLog()
        channel.read(length: .max, queue: queue) { log.record($0) }

        for chunk in httpChunks {
            writeAll(peer, Array(chunk.utf8))
            sleepMilliseconds(5)
        }
        close(peer)
        #expect(log.waitDone())

        let chunks = log.chunks
        #expect(chunks.last?.isDone == true)
        #expect(chunks.last?.error == nil)
        #expect(chunks.dropLast().allSatisfy { !$0.isDone && $0.error == nil })
        let received = log.data
        #expect(received.count == 351)
        #expect(Array(received) == Array(httpChunks.joined().utf8))
        let (headerEnd, _) = findHeaderEnd(in: received)
        #expect(headerEnd == 253)
        #expect(text(of: received.subdata(in: 0..<253)).contains("\r\nContent-Length: 131\r\n"))

        channel.close()
        #expect(cleanups.waitRan())
        sleepMilliseconds(50)
        #expect(cleanups.errors.count == 1)
        #expect(cleanups.errors.first.map { $0 == nil } == true)
        #expect(fcntl(mine, F_GETFL) & O_NONBLOCK == 0, "the channel restores the descriptor's flags")
        #expect(channel.fileDescriptor == -1)
        close(mine)
    }

    /// A random-access channel on a path opens the file lazily and reads
    /// bytes [4096, 12288) of a 1 MiB file, then signals done.
    @Test func randomAccessByPath() throws {
        let bytes = ioPattern(1 << 20)
        let path = makeTemporaryFile(bytes)
        defer { unlink(path) }
        let queue = WorkQueue(label: "test.io.random")
        let cleanups = CleanupLog()
        let channel = try IOChannel(kind: .random, path: path, flags: O_RDONLY, queue: queue) {
            cleanups.record($0)
        }
        #expect(channel.fileDescriptor == -1, "a path channel opens its file on first use")
        let log = ChunkLog()
        channel.read(offset: 4096, length: 8192, queue: queue) { log.record($0) }
        #expect(log.waitDone())
        #expect(log.chunks.last?.error == nil)
        #expect(log.data == DataBuffer(bytes: bytes[4096..<12288]))

        // A second read at another offset, and one past the end of the file.
        let tail = ChunkLog()
        channel.read(offset: (1 << 20) - 100, length: 1000, queue: queue) { tail.record($0) }
        #expect(tail.waitDone())
        #expect(Array(tail.data) == Array(bytes[((1 << 20) - 100)...]))
        #expect(tail.chunks.last?.error == nil)

        channel.close()
        #expect(cleanups.waitRan())
        #expect(cleanups.errors == [nil])
    }

    /// 10 MiB written through a stream channel to a pipe whose reader is
    /// slow: the write completes (done, nothing unwritten, no error) and the
    /// reader receives identical bytes.
    @Test func largeWriteToSlowReader() {
        let bytes = ioPattern(10 << 20)
        // Several regions, as a program assembling a response would have.
        var data = DataBuffer()
        var start = 0
        for size in [1, 4095, 1 << 20, 3 << 20, (10 << 20) - (4 << 20) - 4096] {
            data.append(DataBuffer(bytes: bytes[start..<start + size]))
            start += size
        }
        #expect(data.count == bytes.count)
        let (readEnd, writeEnd) = makePipe()
        let queue = WorkQueue(label: "test.io.slow")
        let cleanups = CleanupLog()
        let channel = IOChannel(kind: .stream, fileDescriptor: writeEnd, queue: queue) { error in
            close(writeEnd)   // the descriptor is ours again: EOF for the reader
            cleanups.record(error)
        }
        let log = ChunkLog()
        channel.write(data: data, queue: queue) { chunk in
            log.record(chunk)
            channel.close()
        }

        var received = [UInt8](repeating: 0, count: bytes.count + 1)
        var total = 0
        var reads = 0
        while total < received.count {
            let n = received.withUnsafeMutableBytes {
                read(readEnd, $0.baseAddress! + total, Swift.min(65536, $0.count - total))
            }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            total += n
            reads += 1
            if reads % 8 == 0 { sleepMilliseconds(1) }   // the slow reader
        }
        close(readEnd)
        received.removeLast(received.count - total)

        #expect(log.waitDone())
        let chunks = log.chunks
        #expect(chunks.last?.isDone == true)
        #expect(chunks.last?.error == nil)
        #expect(chunks.last?.data.isEmpty == true)
        // Progress while the reader lagged: what is left shrinks each time.
        let left = chunks.dropLast().map(\.data.count)
        #expect(chunks.dropLast().allSatisfy { !$0.isDone && $0.error == nil })
        #expect(zip(left, left.dropFirst()).allSatisfy { $0 > $1 })
        #expect(left.allSatisfy { $0 > 0 && $0 < bytes.count })
        if let last = chunks.dropLast().last {
            #expect(last.data == data.subdata(in: (data.count - last.data.count)..<data.count))
        }
        #expect(received.count == bytes.count)
        #expect(sameBytes(received, bytes))
        #expect(cleanups.waitRan())
        #expect(cleanups.errors == [nil])
    }

    /// The one-shot read delivers a 100 KB file in one buffer with no error
    /// and leaves the descriptor open; the one-shot write reports nothing
    /// unwritten and the file then holds the bytes.
    @Test func oneShotReadAndWrite() {
        let bytes = ioPattern(100_000)
        let path = makeTemporaryFile(bytes)
        defer { unlink(path) }
        let queue = WorkQueue(label: "test.io.oneshot")

        let fd = open(path, O_RDONLY)
        #expect(fd >= 0)
        let readDone = CountingSemaphore(value: 0)
        let result = UnsafeBox<(DataBuffer, IOError?)>((DataBuffer(), IOError(errnoCode: -1)))
        IOChannel.read(fileDescriptor: fd, queue: queue) { data, error in
            result.value = (data, error)
            readDone.signal()
        }
        #expect(readDone.wait(timeout: .now() + rendezvousTimeout) == .success)
        let (data, readError) = queue.sync { result.value }
        #expect(readError == nil)
        #expect(data.count == bytes.count)
        #expect(data == DataBuffer(bytes: bytes))
        #expect(fcntl(fd, F_GETFD) != -1, "the descriptor is the caller's again, still open")
        close(fd)

        let outPath = makeTemporaryFile([])
        defer { unlink(outPath) }
        let out = open(outPath, O_WRONLY | O_TRUNC)
        #expect(out >= 0)
        let payload = DataBuffer(bytes: bytes[0..<50_000]) + DataBuffer(bytes: bytes[50_000...])
        let writeDone = CountingSemaphore(value: 0)
        let written = UnsafeBox<(DataBuffer, IOError?)>((DataBuffer(), IOError(errnoCode: -1)))
        IOChannel.write(fileDescriptor: out, data: payload, queue: queue) { unwritten, error in
            written.value = (unwritten, error)
            writeDone.signal()
        }
        #expect(writeDone.wait(timeout: .now() + rendezvousTimeout) == .success)
        let (unwritten, writeError) = queue.sync { written.value }
        #expect(writeError == nil)
        #expect(unwritten.isEmpty)
        close(out)
        #expect(sameBytes(readFile(outPath), bytes))
    }

    /// A descriptor that is not open: the read ends at once with EBADF and
    /// no data, and the cleanup handler runs exactly once, with EBADF.
    @Test func closedDescriptorReportsEBADF() {
        let cleanups = CleanupLog()
        let channel = IOChannel(kind: .stream, fileDescriptor: closedDescriptor) { cleanups.record($0) }
        let log = ChunkLog()
        channel.read(queue: WorkQueue(label: "test.io.ebadf")) { log.record($0) }
        #expect(log.waitDone())
        #expect(log.chunks.count == 1)
        #expect(log.chunks.first?.error == IOError(errnoCode: EBADF))
        #expect(log.chunks.first?.data.isEmpty == true)
        channel.close()
        #expect(cleanups.waitRan())
        sleepMilliseconds(50)
        #expect(cleanups.errors == [IOError(errnoCode: EBADF)])
        #expect(IOError(errnoCode: EBADF).description == "Bad file descriptor (errno 9)")
        #expect(IOError(errnoCode: EBADF).message == "Bad file descriptor")
    }

    /// Reading from a write-only descriptor (a pipe's write end) fails with
    /// EBADF; writing through the same channel still works.
    @Test func readFromWriteOnlyDescriptor() {
        let (readEnd, writeEnd) = makePipe()
        let queue = WorkQueue(label: "test.io.wronly")
        let cleanups = CleanupLog()
        let channel = IOChannel(kind: .stream, fileDescriptor: writeEnd, queue: queue) { cleanups.record($0) }
        let log = ChunkLog()
        channel.read(queue: queue) { log.record($0) }
        #expect(log.waitDone())
        #expect(log.chunks.first?.error == IOError(errnoCode: EBADF))

        let written = ChunkLog()
        channel.write(data: DataBuffer(bytes: "ok".utf8), queue: queue) { written.record($0) }
        #expect(written.waitDone())
        #expect(written.chunks.last?.error == nil)
        var two = [UInt8](repeating: 0, count: 2)
        #expect(two.withUnsafeMutableBytes { read(readEnd, $0.baseAddress, 2) } == 2)
        #expect(two == Array("ok".utf8))

        channel.close()
        #expect(cleanups.waitRan())
        close(readEnd)
        close(writeEnd)
    }

    /// The peer closes early: a large write ends with EPIPE (or
    /// ECONNRESET), never a crash or SIGPIPE, and hands back what was not
    /// written.
    @Test func peerClosingEarlyEndsWrite() {
        let (mine, peer) = makeSocketPair()
        let queue = WorkQueue(label: "test.io.peer")
        let cleanups = CleanupLog()
        let channel = IOChannel(kind: .stream, fileDescriptor: mine, queue: queue) { error in
            close(mine)
            cleanups.record(error)
        }
        let total = 8 << 20
        let data = DataBuffer(bytes: ioPattern(total))
        let log = ChunkLog()
        channel.write(data: data, queue: queue) { log.record($0) }

        var buffer = [UInt8](repeating: 0, count: 1000)
        var got = 0
        while got < 1000 {
            let n = buffer.withUnsafeMutableBytes { read(peer, $0.baseAddress! + got, 1000 - got) }
            if n <= 0 { break }
            got += n
        }
        #expect(got == 1000)
        close(peer)

        #expect(log.waitDone())
        let last = log.chunks.last
        #expect(last?.isDone == true)
        #expect(last?.error == IOError(errnoCode: EPIPE) || last?.error == IOError(errnoCode: ECONNRESET),
                "\(String(describing: last?.error))")
        let unwritten = last?.data.count ?? 0
        #expect(unwritten > 0 && unwritten < total)
        // What is left over is the tail of what was given.
        if let rest = last?.data {
            #expect(rest == data.subdata(in: (total - rest.count)..<total))
        }
        channel.close()
        #expect(cleanups.waitRan())
    }

    /// close(stop: true) ends a read that is waiting with ECANCELED;
    /// operations issued after close fail with ECANCELED too; the cleanup
    /// runs once, without error.
    @Test func closeWithStopCancels() {
        let (mine, peer) = makeSocketPair()
        defer { close(peer) }
        let queue = WorkQueue(label: "test.io.stop")
        let cleanups = CleanupLog()
        let channel = IOChannel(kind: .stream, fileDescriptor: mine, queue: queue) { error in
            close(mine)
            cleanups.record(error)
        }
        let log = ChunkLog()
        channel.read(queue: queue) { log.record($0) }
        sleepMilliseconds(20)
        channel.close(stop: true)
        #expect(log.waitDone())
        #expect(log.chunks.last?.error == IOError(errnoCode: ECANCELED))

        let late = ChunkLog()
        channel.read(queue: queue) { late.record($0) }
        #expect(late.waitDone())
        #expect(late.chunks.last?.error == IOError(errnoCode: ECANCELED))
        #expect(cleanups.waitRan())
        sleepMilliseconds(20)
        #expect(cleanups.errors == [nil])
    }

    /// High water splits deliveries; a barrier runs after the operations
    /// before it, with the descriptor usable.
    @Test func highWaterAndBarrier() throws {
        let bytes = ioPattern(100_000)
        let path = makeTemporaryFile(bytes)
        defer { unlink(path) }
        let queue = WorkQueue(label: "test.io.high")
        let channel = try IOChannel(kind: .random, path: path, flags: O_RDONLY)
        channel.setHighWater(16384)
        let log = ChunkLog()
        channel.read(queue: queue) { log.record($0) }
        let barrierRan = CountingSemaphore(value: 0)
        let seen = UnsafeBox<(doneBefore: Bool, descriptor: Int32)>((false, -1))
        channel.barrier {
            seen.value = (log.chunks.last?.isDone == true, channel.fileDescriptor)
            barrierRan.signal()
        }
        #expect(log.waitDone())
        #expect(barrierRan.wait(timeout: .now() + rendezvousTimeout) == .success)
        #expect(log.data == DataBuffer(bytes: bytes))
        #expect(log.chunks.allSatisfy { $0.data.count <= 16384 })
        #expect(log.chunks.count >= 7)
        #expect(queue.sync { seen.value.descriptor } >= 0)
    }

    /// Bad paths: a relative one throws EINVAL, whose description says the
    /// path must be absolute; a missing file fails the read and the cleanup
    /// with ENOENT; a random channel on a pipe fails with ESPIPE.
    @Test func pathAndKindErrors() throws {
        let relative = #expect(throws: IOError(errnoCode: EINVAL)) {
            try IOChannel(kind: .random, path: "relative/file", flags: O_RDONLY)
        }
        #expect(relative?.description ==
                "Invalid argument (errno 22): path 'relative/file' is relative: a path channel needs an absolute path")
        #expect(IOError(errnoCode: ENOENT).description == "No such file or directory (errno 2)")
        let cleanups = CleanupLog()
        let missing = try IOChannel(kind: .random, path: "/nonexistent-swiftqueues/none", flags: O_RDONLY) {
            cleanups.record($0)
        }
        let log = ChunkLog()
        missing.read(queue: WorkQueue(label: "test.io.enoent")) { log.record($0) }
        #expect(log.waitDone())
        #expect(log.chunks.last?.error == IOError(errnoCode: ENOENT))
        missing.close()
        #expect(cleanups.waitRan())
        #expect(cleanups.errors == [IOError(errnoCode: ENOENT)])

        let (readEnd, writeEnd) = makePipe()
        defer { close(readEnd); close(writeEnd) }
        let random = IOChannel(kind: .random, fileDescriptor: readEnd)
        let spipe = ChunkLog()
        random.read(queue: WorkQueue(label: "test.io.espipe")) { spipe.record($0) }
        #expect(spipe.waitDone())
        #expect(spipe.chunks.last?.error == IOError(errnoCode: ESPIPE))
    }

    /// A channel over another's descriptor: both read it; closing the
    /// first does not end the second, and both cleanup handlers run once
    /// each, only after both are done. A channel over a closed one fails
    /// with ECANCELED.
    @Test func channelOverChannelSharesDescriptor() {
        let (mine, peer) = makeSocketPair()
        defer { close(peer) }
        let queue = WorkQueue(label: "test.io.shared")
        let firstCleanups = CleanupLog()
        let secondCleanups = CleanupLog()
        let first = IOChannel(kind: .stream, fileDescriptor: mine, queue: queue) { firstCleanups.record($0) }
        let second = IOChannel(kind: .stream, channel: first, queue: queue) { secondCleanups.record($0) }
        #expect(second.kind == .stream)

        writeAll(peer, Array("hello".utf8))
        let one = ChunkLog()
        first.read(length: 5, queue: queue) { one.record($0) }
        #expect(one.waitDone())
        #expect(text(of: one.data) == "hello")
        first.close()
        sleepMilliseconds(50)
        #expect(firstCleanups.errors.isEmpty, "the descriptor is still in use by the second channel")

        writeAll(peer, Array("world".utf8))
        let two = ChunkLog()
        second.read(length: 5, queue: queue) { two.record($0) }
        #expect(two.waitDone())
        #expect(two.chunks.last?.error == nil)
        #expect(text(of: two.data) == "world")
        second.close()
        #expect(firstCleanups.waitRan())
        #expect(secondCleanups.waitRan())
        sleepMilliseconds(20)
        #expect(firstCleanups.errors == [nil])
        #expect(secondCleanups.errors == [nil])
        close(mine)

        let third = IOChannel(kind: .stream, channel: first, queue: queue)
        let late = ChunkLog()
        third.read(queue: queue) { late.record($0) }
        #expect(late.waitDone())
        #expect(late.chunks.last?.error == IOError(errnoCode: ECANCELED))
    }

    /// The async forms on a socket pair: a write returns once written, a
    /// read of a given length returns exactly those bytes.
    @Test func asyncReadAndWriteOnSockets() async throws {
        let (a, b) = makeSocketPair()
        let writer = IOChannel(kind: .stream, fileDescriptor: a) { _ in close(a) }
        let reader = IOChannel(kind: .stream, fileDescriptor: b) { _ in close(b) }
        let bytes = ioPattern(300_000)
        let payload = DataBuffer(bytes: bytes)
        async let received = reader.read(length: bytes.count)
        try await writer.write(data: payload)
        let data = try await received
        #expect(data == payload)

        // To end of file once the writer closes.
        writer.close()
        let rest = try await reader.read()
        #expect(rest.isEmpty)
        reader.close()
    }

    /// The async read of a whole file through a path channel, and async
    /// errors thrown as IOError.
    @Test func asyncReadOfFileAndErrors() async throws {
        let bytes = ioPattern(3 << 20)
        let path = makeTemporaryFile(bytes)
        defer { unlink(path) }
        let channel = try IOChannel(kind: .random, path: path, flags: O_RDONLY)
        let data = try await channel.read()
        #expect(data.count == bytes.count)
        #expect(data == DataBuffer(bytes: bytes))
        let middle = try await channel.read(offset: 1000, length: 10)
        #expect(Array(middle) == Array(bytes[1000..<1010]))

        let bad = IOChannel(kind: .stream, fileDescriptor: closedDescriptor)
        await #expect(throws: IOError(errnoCode: EBADF)) {
            _ = try await bad.read()
        }
        await #expect(throws: IOError(errnoCode: EBADF)) {
            try await bad.write(data: DataBuffer(bytes: [1, 2, 3]))
        }
        do {
            _ = try await bad.read()
            Issue.record("read of a bad descriptor succeeded")
        } catch {
            #expect(error.errnoCode == EBADF)   // typed: IOError
        }
    }

    /// The static async forms over sq_read / sq_write.
    @Test func asyncOneShotReadAndWrite() async throws {
        let bytes = ioPattern(200_000)
        let path = makeTemporaryFile([])
        defer { unlink(path) }
        let out = open(path, O_WRONLY | O_TRUNC)
        #expect(out >= 0)
        try await IOChannel.write(fileDescriptor: out, data: DataBuffer(bytes: bytes))
        close(out)

        let fd = open(path, O_RDONLY)
        #expect(fd >= 0)
        let data = try await IOChannel.read(fileDescriptor: fd)
        #expect(data == DataBuffer(bytes: bytes))
        let more = try await IOChannel.read(fileDescriptor: fd, length: 100)
        #expect(more.isEmpty)   // at end of file already
        close(fd)

        await #expect(throws: IOError(errnoCode: EBADF)) {
            _ = try await IOChannel.read(fileDescriptor: closedDescriptor)
        }
    }
}
