//===----------------------------------------------------------------------===//
//
// SwiftQueues — quality-of-service classes over the C runtime's
// sq_qos_class_t (include/swiftqueues/queue.h): WorkQoS, used by
// WorkQueue(label:qos:attributes:target:), WorkQueue.global(qos:) and
// WorkItem(qos:flags:_:).
//
//===----------------------------------------------------------------------===//

import CSwiftQueues

/// A quality-of-service class and a relative priority within it
/// (`DispatchQoS`): how urgent a queue's or a work item's work is.
///
/// Each class has its global queue (``WorkQueue/global(qos:)``), and the
/// worker pool always starts the highest class of work waiting (it ages
/// `.utility` and `.background` work so that they are never starved).
/// Where the process may change its threads' nice values back and forth,
/// each class also runs at a nice value of its own (lower classes nicer).
///
///     let indexer = WorkQueue(label: "com.example.index", qos: .utility)
///     let urgent = WorkItem(qos: .userInitiated, flags: .enforceQoS) { refresh() }
///     indexer.async(execute: urgent)   // runs at .userInitiated
///
/// The relative priority (`-15...0`, default 0) orders queues of one class
/// among themselves in libdispatch; SwiftQueues keeps and reports it but
/// schedules by class only.
public struct WorkQoS: Sendable, Hashable {
    /// A quality-of-service class (`DispatchQoS.QoSClass`, `qos_class_t`).
    /// The raw value is the C runtime's `SQ_QOS_CLASS_*` (libdispatch's
    /// `QOS_CLASS_*`); a higher value is a more urgent class.
    public enum Class: UInt32, Sendable, Hashable, CaseIterable, Comparable {
        /// Work the user is interacting with right now: animations, input
        /// handling (`SQ_QOS_CLASS_USER_INTERACTIVE`, 0x21).
        case userInteractive = 0x21
        /// Work the user asked for and waits on (`SQ_QOS_CLASS_USER_INITIATED`,
        /// 0x19): the class of ``WorkQueue/Priority/high``.
        case userInitiated = 0x19
        /// The class of work nobody classified (`SQ_QOS_CLASS_DEFAULT`,
        /// 0x15), and of the program's own threads.
        case `default` = 0x15
        /// Long-running work the user knows about but does not wait on
        /// (`SQ_QOS_CLASS_UTILITY`, 0x11): the class of
        /// ``WorkQueue/Priority/low``.
        case utility = 0x11
        /// Work nobody waits for: prefetching, backups, indexing
        /// (`SQ_QOS_CLASS_BACKGROUND`, 0x09).
        case background = 0x09
        /// No class (`SQ_QOS_CLASS_UNSPECIFIED`, 0): a queue created without
        /// one runs at its target's class; an item without one at its
        /// queue's.
        case unspecified = 0x00

        /// Whether `lhs` is less urgent than `rhs` (`.unspecified` is the
        /// least).
        public static func < (lhs: Class, rhs: Class) -> Bool {
            lhs.rawValue < rhs.rawValue
        }
    }

    /// The class.
    public let qosClass: Class

    /// The priority within the class: `-15...0`, 0 the most urgent.
    public let relativePriority: Int

    /// The lowest relative priority (`SQ_QOS_MIN_RELATIVE_PRIORITY`, -15).
    public static let minimumRelativePriority = Int(SQ_QOS_MIN_RELATIVE_PRIORITY)

    /// A class with a relative priority within it. A relative priority
    /// outside `-15...0` stops the process.
    public init(qosClass: Class, relativePriority: Int = 0) {
        guard relativePriority <= 0, relativePriority >= Self.minimumRelativePriority else {
            misuse("WorkQoS(qosClass:relativePriority:)",
                   "relative priority \(relativePriority) is out of range "
                   + "(\(Self.minimumRelativePriority) to 0)")
        }
        self.init(unchecked: qosClass, relativePriority: relativePriority)
    }

    /// A value the C runtime gave, already valid.
    internal init(unchecked qosClass: Class, relativePriority: Int) {
        self.qosClass = qosClass
        self.relativePriority = relativePriority
    }

    /// `.userInteractive` at relative priority 0.
    public static let userInteractive = WorkQoS(unchecked: .userInteractive, relativePriority: 0)
    /// `.userInitiated` at relative priority 0.
    public static let userInitiated = WorkQoS(unchecked: .userInitiated, relativePriority: 0)
    /// `.default` at relative priority 0.
    public static let `default` = WorkQoS(unchecked: .default, relativePriority: 0)
    /// `.utility` at relative priority 0.
    public static let utility = WorkQoS(unchecked: .utility, relativePriority: 0)
    /// `.background` at relative priority 0.
    public static let background = WorkQoS(unchecked: .background, relativePriority: 0)
    /// No class: a queue's or work item's default.
    public static let unspecified = WorkQoS(unchecked: .unspecified, relativePriority: 0)
}

extension WorkQoS.Class {
    /// The class for a value of the C runtime's (`sq_qos_class_t`);
    /// `.unspecified` for a value that names none.
    internal init(c value: sq_qos_class_t) {
        self = WorkQoS.Class(rawValue: value) ?? .unspecified
    }
}

extension WorkQoS: CustomStringConvertible {
    /// `userInitiated`, or `utility(-4)` with a relative priority.
    public var description: String {
        relativePriority == 0 ? "\(qosClass)" : "\(qosClass)(\(relativePriority))"
    }
}

extension WorkQueue.Priority {
    /// The class of this priority's global queue: `.high` is
    /// `.userInitiated`, `.default` `.default`, `.low` `.utility`,
    /// `.background` `.background` (`WorkQueue.global(.high)` and
    /// `WorkQueue.global(qos: .userInitiated)` are one queue).
    public var qosClass: WorkQoS.Class {
        switch self {
        case .high: return .userInitiated
        case .default: return .default
        case .low: return .utility
        case .background: return .background
        }
    }
}
