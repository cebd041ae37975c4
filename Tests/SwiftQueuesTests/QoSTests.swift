// Quality-of-service classes: WorkQoS, queues created with a class, the
// global queue of each class, work items with a class and the QoS flags,
// overrides, precedence under load, and Swift task priorities under the
// installed executor. The class work runs at is read inside the work with
// WorkQueue.currentQoSClass (sq_qos_class_self).
//
// Where an item's class depends on an override, the queue is held by a
// blocker (or suspended) while the item is submitted, so the outcome does
// not depend on which worker looks first. The suite runs one test at a
// time: the precedence test counts work on the shared pool, and the C
// runtime fills in its queue attributes with a class on first use
// (queue.c), which tests creating such queues at once would do together.

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Testing
import CSwiftQueues
import SwiftQueues

/// The class `body`'s closure runs at when submitted with `submit`, read
/// inside it.
private func classOfWork(_ submit: (@escaping @Sendable () -> Void) -> Void) -> WorkQoS.Class? {
    let seen = SpinLocked<WorkQoS.Class?>(nil)
    let done = CountingSemaphore(value: 0)
    submit {
        seen.withLock { $0 = WorkQueue.currentQoSClass }
        done.signal()
    }
    guard done.wait(timeout: .now() + rendezvousTimeout) == .success else { return nil }
    return seen.withLock { $0 }
}

/// A serial queue held by a task until `release()`: work submitted
/// meanwhile waits behind it, so a raise made at submission is in place
/// before the queue runs again.
private final class HeldQueue: Sendable {
    let queue: WorkQueue
    private let started = CountingSemaphore(value: 0)
    private let proceed = CountingSemaphore(value: 0)

    init(_ queue: WorkQueue) {
        self.queue = queue
        queue.async { [started, proceed] in
            started.signal()
            _ = proceed.wait(timeout: .now() + rendezvousTimeout)
        }
        _ = started.wait(timeout: .now() + rendezvousTimeout)
    }

    func release() {
        proceed.signal()
    }
}

/// Where an `.assignCurrent` item made by `make` runs, on a held serial
/// queue that targets the background global queue.
private func classOfItem(madeBy make: (@escaping @Sendable () -> WorkItem) -> WorkItem?) -> WorkQoS.Class? {
    let queue = WorkQueue(label: "qos.assign.target", target: .global(qos: .background))
    let seen = SpinLocked<WorkQoS.Class?>(nil)
    let done = CountingSemaphore(value: 0)
    guard let item = make({
        WorkItem(flags: .assignCurrent) {
            seen.withLock { $0 = WorkQueue.currentQoSClass }
            done.signal()
        }
    }) else { return nil }
    let held = HeldQueue(queue)
    queue.async(execute: item)
    held.release()
    guard done.wait(timeout: .now() + rendezvousTimeout) == .success else { return nil }
    return seen.withLock { $0 }
}

/// Busy for `milliseconds` of wall time (not a blocking wait: the pool
/// does not start extra workers for it).
private func compute(milliseconds: Int) {
    let end = ContinuousClock.now + .milliseconds(milliseconds)
    while ContinuousClock.now < end {}
}

private let namedClasses: [WorkQoS.Class] = [.userInteractive, .userInitiated, .default, .utility, .background]

@Suite(.serialized) struct QoSTests {
    // MARK: - WorkQoS

    @Test func classesAreTheCRuntimesValuesInOrder() {
        #expect(WorkQoS.Class.userInteractive.rawValue == SQ_QOS_CLASS_USER_INTERACTIVE)
        #expect(WorkQoS.Class.userInitiated.rawValue == SQ_QOS_CLASS_USER_INITIATED)
        #expect(WorkQoS.Class.default.rawValue == SQ_QOS_CLASS_DEFAULT)
        #expect(WorkQoS.Class.utility.rawValue == SQ_QOS_CLASS_UTILITY)
        #expect(WorkQoS.Class.background.rawValue == SQ_QOS_CLASS_BACKGROUND)
        #expect(WorkQoS.Class.unspecified.rawValue == SQ_QOS_CLASS_UNSPECIFIED)
        #expect(WorkQoS.minimumRelativePriority == Int(SQ_QOS_MIN_RELATIVE_PRIORITY))
        #expect(WorkQoS.Class.allCases.sorted(by: >) == namedClasses + [.unspecified])
        #expect(WorkQoS.userInitiated == WorkQoS(qosClass: .userInitiated))
        #expect(WorkQoS.utility != WorkQoS(qosClass: .utility, relativePriority: -1))
        #expect(WorkQoS(qosClass: .utility, relativePriority: -4).description == "utility(-4)")
        #expect(WorkQoS.default.description == "default")
    }

    @Test func priorityMapsOntoClasses() {
        #expect(WorkQueue.Priority.high.qosClass == .userInitiated)
        #expect(WorkQueue.Priority.default.qosClass == .default)
        #expect(WorkQueue.Priority.low.qosClass == .utility)
        #expect(WorkQueue.Priority.background.qosClass == .background)
        for priority in WorkQueue.Priority.allCases {
            #expect(WorkQueue.global(priority) === WorkQueue.global(qos: priority.qosClass))
        }
    }

    @Test func relativePriorityOutOfRangeIsReported() async {
        let above = await #expect(processExitsWith: .signal(SIGABRT), observing: [\.standardErrorContent]) {
            _ = WorkQoS(qosClass: .utility, relativePriority: 1)
        }
        let aboveMessage = String(decoding: above?.standardErrorContent ?? [], as: UTF8.self)
        #expect(aboveMessage.contains(
            "SwiftQueues: WorkQoS(qosClass:relativePriority:): relative priority 1 is out of range (-15 to 0)"))
        let below = await #expect(processExitsWith: .signal(SIGABRT), observing: [\.standardErrorContent]) {
            _ = WorkQoS(qosClass: .background, relativePriority: -16)
        }
        let belowMessage = String(decoding: below?.standardErrorContent ?? [], as: UTF8.self)
        #expect(belowMessage.contains(
            "SwiftQueues: WorkQoS(qosClass:relativePriority:): relative priority -16 is out of range (-15 to 0)"))
    }

    // MARK: - Queues

    @Test func queuesReportTheirClassAndRelativePriority() {
        let utility = WorkQoS(qosClass: .utility, relativePriority: -4)
        #expect(WorkQueue(label: "qos.serial", qos: utility).qos == utility)
        let wide = WorkQueue(label: "qos.concurrent", qos: .userInitiated, attributes: .concurrent)
        #expect(wide.qos == .userInitiated)
        #expect(wide.isConcurrent)
        let inactive = WorkQueue(label: "qos.inactive", qos: WorkQoS(qosClass: .background, relativePriority: -15),
                                 attributes: [.concurrent, .initiallyInactive])
        #expect(inactive.qos == WorkQoS(qosClass: .background, relativePriority: -15))
        inactive.activate()
        // No class of its own: unspecified, whatever it targets.
        #expect(WorkQueue(label: "qos.none").qos == .unspecified)
        #expect(WorkQueue(label: "qos.none.bg", target: .global(qos: .background)).qos == .unspecified)
        #expect(WorkQueue(label: "qos.none.rel", qos: WorkQoS(qosClass: .unspecified, relativePriority: -3)).qos
                == .unspecified)
        #expect(WorkQueue.main.qos == .unspecified)
        // A global queue reports its class.
        for qosClass in namedClasses {
            #expect(WorkQueue.global(qos: qosClass).qos == WorkQoS(qosClass: qosClass))
        }
    }

    @Test func aQueueWithAClassRunsItsWorkAtThatClass() {
        for qosClass in namedClasses {
            let serial = WorkQueue(label: "qos.runs.\(qosClass)", qos: WorkQoS(qosClass: qosClass, relativePriority: -2))
            #expect(classOfWork { serial.async($0) } == qosClass)
            let wide = WorkQueue(label: "qos.runs.wide.\(qosClass)", qos: WorkQoS(qosClass: qosClass),
                                 attributes: .concurrent)
            #expect(classOfWork { wide.async($0) } == qosClass)
            // Retargeted to nil: back to its class's global queue.
            serial.setTarget(nil)
            #expect(classOfWork { serial.async($0) } == qosClass)
        }
        // No class: the default global queue's.
        let plain = WorkQueue(label: "qos.runs.plain")
        #expect(classOfWork { plain.async($0) } == .default)
        // A queue without a class runs at its target's.
        let onUtility = WorkQueue(label: "qos.runs.target", target: .global(qos: .utility))
        #expect(classOfWork { onUtility.async($0) } == .utility)
    }

    @Test func currentClassOutsideQueueWorkIsDefault() {
        let seen = SpinLocked<[WorkQoS.Class]>([])
        onThreads(1) { _ in
            let outside = WorkQueue.currentQoSClass
            // sync work runs on the calling thread, at its class.
            let inSync = WorkQueue(label: "qos.sync", qos: .background).sync { WorkQueue.currentQoSClass }
            seen.withLock { $0 = [outside, inSync] }
        }
        #expect(seen.withLock { $0 } == [.default, .default])
    }

    @Test func eachClassHasItsGlobalQueue() {
        let queues = namedClasses.map { WorkQueue.global(qos: $0) }
        #expect(Set(queues.map(ObjectIdentifier.init)).count == 5)
        #expect(WorkQueue.global(qos: .unspecified) === WorkQueue.global())
        for qosClass in namedClasses {
            let queue = WorkQueue.global(qos: qosClass)
            #expect(queue === WorkQueue.global(qos: qosClass))
            #expect(queue.isConcurrent)
            // The C runtime's queue for the class value.
            let cLabel = String(cString: sq_queue_get_label(sq_get_global_queue(Int(qosClass.rawValue), 0)))
            #expect(queue.label == cLabel)
            #expect(classOfWork { queue.async($0) } == qosClass)
        }
        #expect(WorkQueue.global(qos: .userInteractive).label == "com.swiftqueues.root.user-interactive")
    }

    // MARK: - Work items

    /// Behind a blocker on a serial queue that targets the background
    /// global queue: an enforced item of a higher class runs at its class
    /// whether the queue has a class of its own or not; without the flag
    /// it does only on the queue without one. A fresh queue each time: a
    /// raise lasts until its queue has run dry.
    @Test func anEnforcedItemRunsAtItsClassOnABackgroundSerialQueue() {
        func plain() -> WorkQueue { WorkQueue(label: "qos.item.plain", target: .global(qos: .background)) }
        func own() -> WorkQueue { WorkQueue(label: "qos.item.own", qos: .background) }
        func run(on queue: WorkQueue, _ qos: WorkQoS, _ flags: WorkItem.Flags) -> WorkQoS.Class? {
            let held = HeldQueue(queue)
            return classOfWork { body in
                queue.async(execute: WorkItem(qos: qos, flags: flags, body))
                held.release()
            }
        }
        #expect(run(on: plain(), .userInitiated, .enforceQoS) == .userInitiated)
        #expect(run(on: own(), .userInitiated, .enforceQoS) == .userInitiated)
        #expect(run(on: own(), WorkQoS(qosClass: .userInteractive, relativePriority: -7), .enforceQoS)
                == .userInteractive)
        // Without the flag: the item's class on the queue without one,
        // the queue's on the queue with one.
        #expect(run(on: plain(), .userInitiated, []) == .userInitiated)
        #expect(run(on: plain(), .utility, .inheritQoS) == .utility)
        #expect(run(on: own(), .userInitiated, []) == .background)
        #expect(run(on: own(), .userInitiated, .inheritQoS) == .background)
        // Lower than the queue: the queue's class.
        #expect(run(on: WorkQueue(label: "qos.item.utility", qos: .utility), .background, .enforceQoS) == .utility)
        // No class of its own: the queue's.
        #expect(run(on: plain(), .unspecified, .noQoS) == .background)
        #expect(run(on: plain(), .unspecified, .enforceQoS) == .background)
    }

    /// Submitted to a suspended queue and run after the resume.
    @Test func anEnforcedItemRaisesASuspendedQueue() {
        let queue = WorkQueue(label: "qos.item.suspended", target: .global(qos: .background))
        queue.suspend()
        let ran = classOfWork { body in
            queue.async(execute: WorkItem(qos: .userInitiated, flags: [.enforceQoS, .detached], body))
            queue.resume()
        }
        #expect(ran == .userInitiated)
    }

    /// On concurrent queues the same rule, with no override needed; a
    /// global queue has a class of its own.
    @Test func anItemOfAHigherClassOnAConcurrentQueue() {
        let wide = WorkQueue(label: "qos.item.wide", attributes: .concurrent, target: .global(qos: .utility))
        #expect(classOfWork { wide.async(execute: WorkItem(qos: .userInitiated, $0)) } == .userInitiated)
        let background = WorkQueue.global(qos: .background)
        #expect(classOfWork { background.async(execute: WorkItem(qos: .default, $0)) } == .background)
        #expect(classOfWork { background.async(execute: WorkItem(qos: .default, flags: .enforceQoS, $0)) }
                == .default)
        let own = WorkQueue(label: "qos.item.wide.own", qos: .utility, attributes: .concurrent)
        #expect(classOfWork { own.async(execute: WorkItem(qos: .userInitiated, flags: .enforceQoS, $0)) }
                == .userInitiated)
        #expect(classOfWork { own.async(execute: WorkItem(qos: .userInitiated, $0)) } == .utility)
    }

    /// `.assignCurrent` gives the item the class of the work that creates
    /// it (`.default` on a thread of the program's own). Waited for with a
    /// semaphore: a waiter on the item would raise its queue.
    @Test func assignCurrentTakesTheCreatorsClass() {
        let creator = WorkQueue(label: "qos.assign.creator", qos: .utility)
        let inUtilityWork = classOfItem { make in
            let made = SpinLocked<WorkItem?>(nil)
            let done = CountingSemaphore(value: 0)
            creator.async {
                made.withLock { $0 = make() }
                done.signal()
            }
            _ = done.wait(timeout: .now() + rendezvousTimeout)
            return made.withLock { $0 }
        }
        #expect(inUtilityWork == .utility)
        let onOwnThread = SpinLocked<WorkQoS.Class?>(nil)
        onThreads(1) { _ in
            let seen = classOfItem { make in make() }
            onOwnThread.withLock { $0 = seen }
        }
        #expect(onOwnThread.withLock { $0 } == .default)
    }

    /// A waiter of a higher class than the item's queue raises the queue:
    /// the item runs at the waiter's class.
    @Test func aWaiterOfAHigherClassRaisesTheQueue() {
        let queue = WorkQueue(label: "qos.waiter", target: .global(qos: .background))
        let held = HeldQueue(queue)
        let seen = SpinLocked<WorkQoS.Class?>(nil)
        let item = WorkItem { seen.withLock { $0 = WorkQueue.currentQoSClass } }
        queue.async(execute: item)
        let waits = SpinLocked<[WaitResult]>([])
        onThreads(1) { _ in
            // A thread of the program's own is .default. The timed wait
            // raises the queue, and the raise outlasts it.
            let first = item.wait(timeout: .now() + .milliseconds(1))
            held.release()
            let second = item.wait(timeout: .now() + rendezvousTimeout)
            waits.withLock { $0 = [first, second] }
        }
        #expect(waits.withLock { $0 } == [.timedOut, .success])
        #expect(seen.withLock { $0 } == .default)
    }

    // MARK: - Precedence

    /// With the pool saturated by background work (4x its width, or its
    /// live workers, of 20 ms computations), user-initiated work submitted after it starts as soon
    /// as a worker is free: of the background blocks still waiting when it
    /// is submitted, at most about one per live worker (those already on
    /// their way, and aging's occasional look at the background queue
    /// first) start before it. Live, not the width: idle workers beyond
    /// the width left by other tests (started for blocking or for a higher
    /// class, retiring after 5 s) are woken by the background submissions
    /// too. Counted in blocks, not time, so a loaded machine only makes it
    /// slower.
    @Test func userInitiatedWorkGoesBeforeASaturatingBackgroundBatch() {
        let pool = RuntimeSnapshot.capture().pool
        let width = max(1, pool.width)
        // 4x the workers alive now (at least the width), so that a pool
        // without precedence, which would start every waiting block first,
        // overtakes the bound below by far.
        let total = 4 * max(width, pool.live)
        let started = AtomicCounter(), finished = AtomicCounter()
        let startedAtSubmit = AtomicCounter(-1), wrongClass = AtomicCounter()
        let liveAtSubmit = AtomicCounter(0)
        let startedBefore = AtomicCounter(-1), finishedBefore = AtomicCounter(-1)
        let classes = SpinLocked<[WorkQoS.Class]>([])
        let group = WorkGroup()
        // From a thread of the program's own: submissions go to the
        // global queues, not to a worker's ring.
        onThreads(1) { _ in
            for _ in 0..<total {
                WorkQueue.global(qos: .background).async(group: group) {
                    if WorkQueue.currentQoSClass != .background { wrongClass.increment() }
                    started.increment()
                    compute(milliseconds: 20)
                    finished.increment()
                }
            }
            // Saturated: every worker has a block (bounded wait).
            let deadline = ContinuousClock.now + .seconds(10)
            while started.load() < Int64(width), ContinuousClock.now < deadline { sched_yield() }
            startedAtSubmit.store(started.load())
            liveAtSubmit.store(Int64(RuntimeSnapshot.capture().pool.live))
            WorkQueue.global(qos: .userInitiated).async(group: group) {
                startedBefore.store(started.load())
                finishedBefore.store(finished.load())
                classes.withLock { $0.append(WorkQueue.currentQoSClass) }
            }
        }
        #expect(group.wait(timeout: .now() + .seconds(60)) == .success)
        #expect(classes.withLock { $0 } == [.userInitiated])
        let overtaking = startedBefore.load() - startedAtSubmit.load()
        #expect(overtaking >= 0)
        #expect(overtaking <= max(Int64(width), liveAtSubmit.load()) + 1,
                "background blocks started after the user-initiated submission: \(overtaking) (of \(total))")
        #expect(finished.load() == Int64(total))
        #expect(wrongClass.load() == 0)
    }

    // MARK: - Swift tasks

    /// Under the installed executor (`SWIFTQUEUES_GLOBAL_EXECUTOR=1 swift
    /// test`, `make test-swift-executor`) a task runs at its priority's
    /// class.
    @Test(.enabled(if: WorkQueue.isGlobalExecutor, "needs SwiftQueues as the global executor"))
    func taskPrioritiesRunAtTheirClasses() async {
        let cases: [(TaskPriority, WorkQoS.Class)] = [
            (TaskPriority(rawValue: 0x21), .userInteractive),
            (.high, .userInitiated), (.userInitiated, .userInitiated),
            (.medium, .default), (.utility, .utility), (.low, .utility),
            (.background, .background),
        ]
        for (priority, expected) in cases {
            let seen = await Task.detached(priority: priority) { WorkQueue.currentQoSClass }.value
            #expect(seen == expected, "priority \(priority.rawValue)")
        }
    }
}
