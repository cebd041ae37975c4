// The sources at the Swift level: timers, data, pipe reads, signals, process
// exits, renames, creation errors, and sources as async sequences. Rendezvous
// use semaphores with generous timeouts; timing checks are lower bounds or
// wide ranges.

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Synchronization
import Testing
import SwiftQueues

/// Polls `condition` every millisecond until it holds or `timeout` passes;
/// returns whether it held.
func sourcePoll(timeout: Duration = rendezvousTimeout, _ condition: () -> Bool) -> Bool {
    let deadline = ContinuousClock.now + timeout
    while !condition() {
        if ContinuousClock.now > deadline { return false }
        usleep(1000)
    }
    return true
}

/// Spawns `/bin/true` and returns its pid (not reaped).
func spawnTrue() -> pid_t {
    var pid: pid_t = 0
    let path = "/bin/true"
    let rc = path.withCString { cPath -> Int32 in
        var argv: [UnsafeMutablePointer<CChar>?] = [strdup(cPath), nil]
        defer { free(argv[0]) }
        return posix_spawn(&pid, cPath, nil, nil, &argv, environ)
    }
    precondition(rc == 0, "posix_spawn failed: \(rc)")
    return pid
}

@Suite struct SourceTests {
    /// A repeating timer fires, its handler cancels it on the 5th delivery,
    /// no delivery follows, the cancel handler runs once, after the last one.
    @Test func timerFiresThenCancelRunsCancelHandler() {
        let queue = WorkQueue(label: "test.timer")
        let timer = TimerSource(queue: queue)
        let deliveries = AtomicCounter()
        let cancels = AtomicCounter()
        let cancelled = CountingSemaphore(value: 0)
        timer.setEventHandler {
            if deliveries.increment() == 5 { timer.cancel() }
        }
        timer.setCancelHandler {
            cancels.increment()
            cancelled.signal()
        }
        timer.schedule(deadline: .now(), repeating: .milliseconds(5))
        #expect(timer.handle == 0)
        #expect(!timer.isCancelled)
        timer.activate()
        #expect(cancelled.wait(timeout: .now() + rendezvousTimeout) == .success)
        #expect(timer.isCancelled)
        sleepMilliseconds(50)
        #expect(deliveries.load() == 5)
        #expect(cancels.load() == 1)
    }

    /// Fires missed while a timer is suspended arrive as one delivery whose
    /// data counts them; firing then continues.
    @Test func suspendedTimerCoalesces() {
        let queue = WorkQueue(label: "test.timer.suspend")
        let timer = TimerSource(flags: .strict, queue: queue)
        #expect(timer.flags == .strict)
        let counts = UnsafeBox<[Int]>([])   // only touched by the serial handler
        let first = CountingSemaphore(value: 0)
        let second = CountingSemaphore(value: 0)
        timer.setEventHandler {
            counts.value.append(timer.fireCount)
            if counts.value.count == 1 {
                timer.suspend()
                first.signal()
            } else if counts.value.count == 2 {
                second.signal()
            }
        }
        timer.schedule(deadline: .now(), repeating: .milliseconds(5))
        timer.activate()
        #expect(first.wait(timeout: .now() + rendezvousTimeout) == .success)
        sleepMilliseconds(100)   // ~20 fires missed
        timer.resume()
        #expect(second.wait(timeout: .now() + rendezvousTimeout) == .success)
        timer.cancel()
        let seen = queue.sync { counts.value }
        #expect(seen.count >= 2)
        #expect(seen[1] >= 5, "missed fires should coalesce: \(seen)")
    }

    /// Values merged from several threads add up; the handler never runs
    /// concurrently with itself on a concurrent queue.
    @Test func dataAddFromSeveralThreadsSums() {
        let queue = WorkQueue(label: "test.data.add", attributes: .concurrent)
        let source = DataSource(kind: .add, queue: queue)
        #expect(source.kind == .add)
        let total = AtomicCounter()
        let meter = OverlapMeter()
        source.setEventHandler {
            meter.enter()
            total.add(Int64(source.data))
            meter.leave()
        }
        source.activate()
        onThreads(4) { _ in
            for _ in 0..<1000 { source.merge(1) }
        }
        #expect(sourcePoll { total.load() == 4000 })
        #expect(meter.maximum == 1)
        source.cancel()
    }

    /// A suspended OR source delivers the union once on resume.
    @Test func dataOrCoalescesWhileSuspended() {
        let queue = WorkQueue(label: "test.data.or")
        let source = DataSource(orMask: 0xFF, queue: queue)
        #expect(source.mask == 0xFF)
        let values = UnsafeBox<[UInt]>([])
        let done = CountingSemaphore(value: 0)
        source.setEventHandler {
            values.value.append(source.data)
            done.signal()
        }
        source.activate()
        source.suspend()
        source.merge(0x1)
        source.merge(0x4)
        source.merge(0x100)   // outside the mask: dropped
        source.resume()
        #expect(done.wait(timeout: .now() + rendezvousTimeout) == .success)
        source.cancel()
        #expect(queue.sync { values.value } == [0x5])
    }

    /// A read source on a pipe reads everything written; at end of file the
    /// handler cancels and the cancel handler closes the descriptor.
    @Test func pipeReadSourceReadsEverything() throws {
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        let (readEnd, writeEnd) = (fds[0], fds[1])
        _ = fcntl(readEnd, F_SETFL, fcntl(readEnd, F_GETFL) | O_NONBLOCK)
        let queue = WorkQueue(label: "test.read")
        let source = try ReadSource(fileDescriptor: readEnd, queue: queue)
        #expect(source.fileDescriptor == readEnd)
        let received = UnsafeBox<[UInt8]>([])
        let closed = CountingSemaphore(value: 0)
        source.setEventHandler {
            var buffer = [UInt8](repeating: 0, count: source.bytesAvailable + 1)
            while true {
                let n = buffer.withUnsafeMutableBytes { read(readEnd, $0.baseAddress, $0.count) }
                if n > 0 {
                    received.value += buffer[0..<n]
                } else {
                    if n == 0 { source.cancel() }   // end of file
                    return
                }
            }
        }
        // Whether the cancel handler's close succeeded: looking at the
        // descriptor afterwards would race with tests running in parallel
        // that may be handed the same number.
        let closedByHandler = AtomicCounter()
        source.setCancelHandler {
            closedByHandler.store(close(readEnd) == 0 ? 1 : 0)
            closed.signal()
        }
        source.activate()
        let payload = (0..<20_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        onThreads(1) { _ in
            var offset = 0
            while offset < payload.count {
                let chunk = min(1500, payload.count - offset)
                let n = payload.withUnsafeBytes { write(writeEnd, $0.baseAddress! + offset, chunk) }
                precondition(n > 0)
                offset += n
                usleep(200)
            }
            close(writeEnd)
        }
        #expect(closed.wait(timeout: .now() + rendezvousTimeout) == .success)
        #expect(queue.sync { received.value } == payload)
        #expect(closedByHandler.load() == 1)   // closed by the cancel handler
    }

    /// A write source fires as soon as the descriptor is writable.
    @Test func writeSourceFiresWhenWritable() throws {
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        let (readEnd, writeEnd) = (fds[0], fds[1])
        let queue = WorkQueue(label: "test.write")
        let source = try WriteSource(fileDescriptor: writeEnd, queue: queue)
        let fired = CountingSemaphore(value: 0)
        let room = AtomicCounter()
        source.setEventHandler {
            room.store(Int64(source.data))
            source.cancel()
            fired.signal()
        }
        source.setCancelHandler { close(writeEnd) }
        source.activate()
        #expect(fired.wait(timeout: .now() + rendezvousTimeout) == .success)
        #expect(room.load() > 0)
        close(readEnd)
    }

    /// With SIGHUP ignored, a signal source counts raises.
    @Test func signalSourceCountsRaises() throws {
        signal(SIGHUP, SIG_IGN)
        let source = try SignalSource(signal: SIGHUP, queue: WorkQueue(label: "test.signal"))
        #expect(source.signal == SIGHUP)
        let armed = CountingSemaphore(value: 0)
        let count = AtomicCounter()
        source.setRegistrationHandler { armed.signal() }
        source.setEventHandler { count.add(Int64(source.count)) }
        source.activate()
        #expect(armed.wait(timeout: .now() + rendezvousTimeout) == .success)
        // kill, not raise: the test's thread may block SIGHUP (under the
        // test runner it does), and raise() would leave the signal pending
        // on that thread; a process-directed signal reaches the runtime.
        for expected in 1...3 {
            kill(getpid(), SIGHUP)
            #expect(sourcePoll { count.load() >= Int64(expected) })
        }
        source.cancel()
        #expect(count.load() == 3)
    }

    /// activate() returns once the signal is caught: a signal raised right
    /// after it reaches the handler instead of its default action (which
    /// ends the process). In a child process, round after round, without
    /// SIG_IGN first.
    @Test func aSignalRaisedRightAfterActivateReachesTheHandler() async {
        await #expect(processExitsWith: .success) {
            // Test threads block these signals; this one takes them, so a
            // signal raised before the handler is installed would end the
            // process.
            var set = sigset_t()
            sigemptyset(&set)
            for signo in [SIGUSR1, SIGUSR2, SIGHUP] { sigaddset(&set, signo) }
            pthread_sigmask(SIG_UNBLOCK, &set, nil)
            for round in 0..<60 {
                let signo = [SIGUSR1, SIGUSR2, SIGHUP][round % 3]
                let source = try! SignalSource(signal: signo)
                let seen = CountingSemaphore(value: 0)
                source.setEventHandler { seen.signal() }
                let cancelled = CountingSemaphore(value: 0)
                source.setCancelHandler { cancelled.signal() }
                if round % 2 == 0 { source.activate() } else { source.resume() }
                raise(signo)
                if seen.wait(timeout: .now() + .seconds(10)) != .success { exit(3) }
                source.cancel()
                if cancelled.wait(timeout: .now() + .seconds(10)) != .success { exit(4) }
            }
        }
    }

    /// A process source sees a child exit ("Child quit.").
    @Test func processSourceSeesChildExit() throws {
        let pid = spawnTrue()
        let source = try ProcessSource(processIdentifier: pid, queue: WorkQueue(label: "test.proc"))
        #expect(source.processIdentifier == pid)
        #expect(source.eventMask == .exit)
        let log = EventLog()
        let quit = CountingSemaphore(value: 0)
        let events = UnsafeBox<ProcessSource.Events>([])
        source.setEventHandler {
            events.value = source.receivedEvents
            log.log("Child quit.")
            source.cancel()
            quit.signal()
        }
        source.activate()
        #expect(quit.wait(timeout: .now() + rendezvousTimeout) == .success)
        var status: Int32 = 0
        #expect(waitpid(pid, &status, 0) == pid)   // the source did not reap it
        #expect(log.lines == ["Child quit."])
        #expect(sourcePoll { source.isCancelled })
        #expect(WorkQueue(label: "fence").sync { events.value.contains(.exit) })
    }

    /// A process that is already gone (reaped, or a pid no process has)
    /// reports its exit as soon as the source is activated, as Darwin's
    /// Dispatch does; it is not a creation error.
    @Test func processSourceOnGoneProcessReportsExit() throws {
        let pid = spawnTrue()
        var status: Int32 = 0
        #expect(waitpid(pid, &status, 0) == pid)   // reaped: no such process any more
        for gone in [pid, -1] {
            let source = try ProcessSource(processIdentifier: gone,
                                           queue: WorkQueue(label: "test.proc.gone"))
            let exited = CountingSemaphore(value: 0)
            let events = UnsafeBox<ProcessSource.Events>([])
            source.setEventHandler {
                events.value = source.receivedEvents
                exited.signal()
            }
            source.activate()
            #expect(exited.wait(timeout: .now() + rendezvousTimeout) == .success)
            source.cancel()
            #expect(sourcePoll { source.isCancelled })
            #expect(WorkQueue(label: "fence").sync { events.value == .exit })
        }
    }

    /// A file-system source sees renames of the file it watches, under any
    /// name.
    @Test func fileSystemSourceSeesRename() throws {
        var template = Array("/tmp/swiftqueues-fs-XXXXXX".utf8CString)
        let made = mkstemp(&template)
        #expect(made >= 0)
        close(made)
        let path = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let fd = open(path, O_RDONLY)
        #expect(fd >= 0)
        let source = try FileSystemSource(fileDescriptor: fd, eventMask: .rename,
                                          queue: WorkQueue(label: "test.vnode"))
        #expect(source.eventMask == .rename)
        let armed = CountingSemaphore(value: 0)
        let renamed = CountingSemaphore(value: 0)
        let seen = AtomicCounter()
        source.setRegistrationHandler { armed.signal() }
        source.setEventHandler {
            seen.or(Int64(source.receivedEvents.rawValue))
            renamed.signal()
        }
        source.setCancelHandler { close(fd) }
        source.activate()
        #expect(armed.wait(timeout: .now() + rendezvousTimeout) == .success)
        let second = path + ".renamed"
        let third = path + ".again"
        #expect(rename(path, second) == 0)
        #expect(renamed.wait(timeout: .now() + rendezvousTimeout) == .success)
        #expect(rename(second, third) == 0)   // one source, any number of renames
        #expect(renamed.wait(timeout: .now() + rendezvousTimeout) == .success)
        source.cancel()
        #expect(UInt(seen.load()) == FileSystemSource.Events.rename.rawValue)
        unlink(third)
    }

    /// Creation failures throw SourceError with the runtime's errno.
    @Test func creationErrorsCarryErrno() {
        // A number above the descriptor limit is never open (an opened and
        // closed one could be reused at once by a test running in parallel).
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        let fd = Int32(clamping: min(UInt64(limit.rlim_cur), UInt64(Int32.max - 100))) + 100
        #expect(throws: SourceError(errnoCode: EBADF, sourceType: "read")) {
            try ReadSource(fileDescriptor: fd)
        }
        #expect(throws: SourceError(errnoCode: EBADF, sourceType: "write")) {
            try WriteSource(fileDescriptor: fd)
        }
        #expect(throws: SourceError(errnoCode: EBADF, sourceType: "file-system")) {
            try FileSystemSource(fileDescriptor: fd, eventMask: .all)
        }
        for bad in [SIGKILL, SIGSTOP, SIGSEGV, 0, 1000] {
            #expect(throws: SourceError(errnoCode: EINVAL, sourceType: "signal")) {
                try SignalSource(signal: bad)
            }
        }
        #expect(throws: SourceError(errnoCode: ENOTSUP, sourceType: "process")) {
            try ProcessSource(processIdentifier: getpid(), eventMask: [.exit, .fork])
        }
        let error = SourceError(errnoCode: EBADF, sourceType: "read")
        #expect(error.description.contains("errno \(EBADF)"))
    }

    /// Sources as async sequences: each delivery's data, in order; the
    /// sequence finishes when the source is cancelled.
    @Test func dataSourceAsAsyncSequence() async {
        let source = DataSource(kind: .add, queue: WorkQueue(label: "test.stream"))
        let events = source.events
        source.activate()
        var iterator = events.makeAsyncIterator()
        source.merge(5)
        #expect(await iterator.next() == 5)
        source.merge(7)
        #expect(await iterator.next() == 7)
        source.cancel()
        #expect(await iterator.next() == nil)
        // After cancellation a new sequence is already finished.
        var sums: [UInt] = []
        for await sum in source { sums.append(sum) }
        #expect(sums.isEmpty)
    }

    /// A `for await` loop over a replace source ends when a handler cancels.
    @Test func forAwaitEndsOnCancel() async {
        let source = DataSource(kind: .replace, queue: WorkQueue(label: "test.stream2"))
        let stream = source.events
        source.activate()
        // Each value is merged once the previous one has arrived (a replace
        // source keeps only the latest), then the producer cancels: no
        // reliance on how soon a sleep ends relative to the handler's job.
        let seen = Atomic<UInt>(0)
        let producer = Task.detached {
            for value in UInt(1)...3 {
                source.merge(value)
                let deadline = ContinuousClock.now + .seconds(10)
                while seen.load(ordering: .acquiring) < value,
                      ContinuousClock.now < deadline {
                    try? await Task.sleep(for: .milliseconds(1))
                }
            }
            source.cancel()
        }
        var last: UInt = 0
        for await value in stream {
            last = value
            seen.store(value, ordering: .releasing)
        }
        await producer.value
        #expect(last == 3)
    }
}
