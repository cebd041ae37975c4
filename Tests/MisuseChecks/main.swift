// Misuse of the Swift API, one case per run, for MisuseMessageTests.swift:
// each case must stop the process with its `SwiftQueues: <call>: <what>`
// line in every build. `make test` builds this program with `-c release`
// too, where Swift's own `precondition` would print no message at all.

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SwiftQueues

let mode = CommandLine.arguments.dropFirst().first ?? ""
switch mode {
case "semaphore-value":
    _ = CountingSemaphore(value: -1)
case "read-length":
    var fds: [Int32] = [0, 0]
    _ = pipe(&fds)
    let channel = IOChannel(kind: .stream, fileDescriptor: fds[0])
    channel.read(length: -1, queue: .global()) { _ in }
case "read-fd-length":
    IOChannel.read(fileDescriptor: 0, length: -1, queue: .global()) { _, _ in }
case "low-water":
    var fds: [Int32] = [0, 0]
    _ = pipe(&fds)
    IOChannel(kind: .stream, fileDescriptor: fds[0]).setLowWater(-1)
case "io-interval":
    var fds: [Int32] = [0, 0]
    _ = pipe(&fds)
    IOChannel(kind: .stream, fileDescriptor: fds[0]).setInterval(.milliseconds(-1))
case "apply-iterations":
    WorkQueue.concurrentPerform(iterations: -1) { _ in }
case "serial-executor":
    _ = WorkQueue(label: "com.example.wide", attributes: .concurrent).asUnownedSerialExecutor()
case "timer-interval":
    TimerSource().schedule(deadline: .now(), repeating: .milliseconds(-5))
case "timer-zero-interval":
    TimerSource().schedule(deadline: .now(), repeating: .zero)
case "timer-leeway":
    TimerSource().schedule(deadline: .now(), leeway: .nanoseconds(-1))
case "repeating-timer-interval":
    _ = RepeatingTimer(interval: .zero, queue: .global()) { _ in }
case "repeating-timer-tolerance":
    _ = RepeatingTimer(interval: .seconds(1), tolerance: .seconds(-1), queue: .global()) { _ in }
case "benchmark-iterations":
    _ = benchmark(iterations: -1) {}
case "counter-bit":
    _ = AtomicCounter().testAndSetBit(64)
case "buffer-index":
    _ = DataBuffer(bytes: [1, 2, 3])[3]
case "buffer-range":
    _ = DataBuffer(bytes: [1, 2, 3]).subdata(in: 2..<5)
default:
    print("unknown mode '\(mode)'")
    exit(2)
}
print("no misuse reported")
exit(0)
