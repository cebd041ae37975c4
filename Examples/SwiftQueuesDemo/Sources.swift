// Recipes for event sources: timer, signal, process and file system.

import SwiftQueues

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A repeating timer that cancels itself after its third fire.
func timerRecipe() {
    section("Repeating TimerSource")
    let ticks = AtomicCounter()
    let cancelled = CountingSemaphore(value: 0)
    let timer = TimerSource(queue: WorkQueue(label: "demo.timer"))
    timer.setEventHandler {
        let tick = ticks.increment()
        print("Tick \(tick)")
        if tick == 3 { timer.cancel() }
    }
    timer.setCancelHandler {
        print("Timer cancelled after \(ticks.load()) ticks")
        cancelled.signal()
    }
    timer.schedule(deadline: .now(), repeating: .milliseconds(20))
    timer.activate()
    waitOrExit(cancelled, "the timer")
}

/// SIGHUP delivered to a handler on a queue instead of ending the process.
func signalRecipe() throws(SourceError) {
    section("SignalSource (SIGHUP)")
    signal(SIGHUP, SIG_IGN)  // the default action would end the process
    let source = try SignalSource(signal: SIGHUP)
    let registered = CountingSemaphore(value: 0)
    let received = CountingSemaphore(value: 0)
    source.setRegistrationHandler { registered.signal() }
    source.setEventHandler {
        print("Got SIGHUP (\(source.count) time(s))")
        source.cancel()
        received.signal()
    }
    source.activate()
    waitOrExit(registered, "the signal source to register")
    kill(getpid(), SIGHUP)
    waitOrExit(received, "SIGHUP")
}

/// Watches a spawned child for its exit, then reaps it.
func processRecipe() throws(SourceError) {
    section("ProcessSource")
    var spawned = pid_t()
    let path = "/bin/true"
    let argv: [UnsafeMutablePointer<CChar>?] = [strdup(path), nil]
    let envp: [UnsafeMutablePointer<CChar>?] = [nil]
    defer { free(argv[0]) }
    let rc = posix_spawn(&spawned, path, nil, nil, argv, envp)
    guard rc == 0 else {
        print("posix_spawn failed: \(rc)")
        exit(1)
    }
    let child = spawned
    // The source does not reap the child, so it is still there to watch even
    // if it has already exited.
    let source = try ProcessSource(processIdentifier: child, eventMask: .exit)
    let quit = CountingSemaphore(value: 0)
    source.setEventHandler {
        var status: Int32 = 0
        waitpid(child, &status, 0)
        print("Child quit.")
        source.cancel()
        quit.signal()
    }
    source.activate()
    waitOrExit(quit, "the child to quit")
}

/// Watches a temporary directory: a file created in it, then its removal.
func fileSystemRecipe() throws(SourceError) {
    section("FileSystemSource")
    var template = Array("/tmp/swiftqueues-demo-XXXXXX".utf8CString)
    guard let made = mkdtemp(&template) else {
        print("mkdtemp failed: errno \(errno)")
        exit(1)
    }
    let directory = String(cString: made)
    let fd = open(directory, O_RDONLY | O_DIRECTORY)
    guard fd >= 0 else {
        print("open failed: errno \(errno)")
        exit(1)
    }
    let source = try FileSystemSource(fileDescriptor: fd, eventMask: [.write, .delete])
    let registered = CountingSemaphore(value: 0)
    let changed = CountingSemaphore(value: 0)
    let deleted = CountingSemaphore(value: 0)
    let reportedChange = AtomicCounter()
    source.setEventHandler {
        let events = source.receivedEvents
        if events.contains(.write), reportedChange.testAndSetBit(0) == false {
            print("The directory changed.")
            changed.signal()
        }
        if events.contains(.delete) {
            print("The directory has been deleted.")
            source.cancel()
        }
    }
    source.setCancelHandler {
        close(fd)
        deleted.signal()
    }
    source.setRegistrationHandler { registered.signal() }
    source.activate()
    waitOrExit(registered, "the watch to register")  // changes before it are unseen

    let file = directory + "/note.txt"
    let fileFD = open(file, O_WRONLY | O_CREAT, 0o644)
    close(fileFD)
    waitOrExit(changed, "the directory to change")
    unlink(file)
    rmdir(directory)
    waitOrExit(deleted, "the directory to be deleted")
}
