//===----------------------------------------------------------------------===//
//
// SwiftQueues — the dependency graph of procedures: adding and removing
// edges, and cycle detection by a dynamic topological order.
//
// Every unfinished procedure has a `graphOrder`, initially its creation
// number, kept so that a procedure's order is greater than the order of each
// unfinished procedure it depends on. An edge that agrees with the order
// ("depend on something created earlier", the common case) costs O(1) and
// cannot close a cycle. An edge against the order searches only the region
// between the two orders (Pearce & Kelly, "A dynamic topological sort
// algorithm for directed acyclic graphs", 2006): if the new dependency
// already waits, transitively, for the procedure, the edge would close a
// cycle and the process stops naming the cycle; otherwise the region is
// renumbered and the invariant holds again. Finished procedures leave the
// graph (nothing can wait on them any more), so the search never visits them.
//
// Edges are added and removed under one global lock. The reverse edges the
// search follows ("who waits for me", `graphDependents`) are unretained: a
// procedure removes itself from them in deinit, and finishing clears them,
// both under the same lock, so the search only meets live procedures.
//
// Scheduling does not use the graph: a procedure in a queue counts its
// unfinished dependencies and registers with each (`startTracking`), and a
// finishing procedure decrements its registered dependents' counts.
//
//===----------------------------------------------------------------------===//

import Synchronization

/// Hands out creation numbers.
private let procedureSerials = Atomic<Int>(0)

/// Serialises edge changes (not finishing, not scheduling).
private let procedureGraphLock = SpinLock()

enum ProcedureGraph {
    /// The next creation number.
    @inline(__always)
    static func nextSerial() -> Int {
        procedureSerials.wrappingAdd(1, ordering: .relaxed).newValue
    }

    /// `dependent` waits for `dependency`.
    static func addEdge(from dependent: Procedure, to dependency: Procedure) {
        if dependent === dependency {
            procedureMisuse("Procedure.addDependency: \(dependent) cannot depend on itself "
                + "(a dependency cycle of one)")
        }
        let phase = ProcedureWord.phase(dependent.word.load(ordering: .acquiring))
        if phase != ProcedureWord.initial {
            procedureMisuse("Procedure.addDependency: \(dependent) has already "
                + (phase == ProcedureWord.finished ? "finished" : "started")
                + "; add dependencies before it starts")
        }
        var register = false
        procedureGraphLock.withLock {
            if dependent.withLocked({ $0.containsDependency(dependency) }) { return }
            let dependencyFinished = dependency.isFinished
            if !dependencyFinished && dependency.graphOrder > dependent.graphOrder {
                reorder(dependent: dependent, dependency: dependency)
            }
            if !dependencyFinished {
                dependency.graphDependents.append(Unmanaged.passUnretained(dependent))
                _ = dependency.word.bitwiseOr(ProcedureWord.hasDependents, ordering: .relaxed)
            }
            // Append, and count it if the dependent is tracked (in a queue).
            // (Misuse is reported after the lock: the message reads the name.)
            let startedPhase = dependent.withLocked { state -> UInt64? in
                var old = dependent.word.load(ordering: .acquiring)
                while true {
                    if ProcedureWord.phase(old) != ProcedureWord.initial {
                        return ProcedureWord.phase(old)
                    }
                    // Tracked (in a queue): the new edge counts. The bit and
                    // hasDependencies live in this word, so a concurrent
                    // startTracking either sees this edge or is seen here.
                    let tracked = old & ProcedureWord.tracked != 0
                    var desired = old | ProcedureWord.hasDependencies
                    if tracked && !dependencyFinished {
                        desired += ProcedureWord.pendingOne
                    }
                    let (done, current) = dependent.word.compareExchange(
                        expected: old, desired: desired,
                        successOrdering: .acquiringAndReleasing, failureOrdering: .acquiring)
                    if done {
                        register = tracked && !dependencyFinished
                        break
                    }
                    old = current
                }
                state.appendDependency(dependency)
                return nil
            }
            if let phase = startedPhase {
                procedureMisuse("Procedure.addDependency: \(dependent) has already "
                    + (phase == ProcedureWord.finished ? "finished" : "started")
                    + "; add dependencies before it starts")
            }
        }
        if register && !dependency.registerDependent(dependent) {
            // It finished meanwhile: uncount it.
            dependent.dependencyDidFinish()
        }
    }

    /// Removes the edge; returns whether there was one.
    static func removeEdge(from dependent: Procedure, to dependency: Procedure) -> Bool {
        var removed = false
        var uncount = false
        procedureGraphLock.withLock {
            var tracked = false
            removed = dependent.withLocked { state -> Bool in
                tracked = dependent.word.load(ordering: .acquiring) & ProcedureWord.tracked != 0
                return state.removeDependency(dependency)
            }
            guard removed else { return }
            if let index = dependency.graphDependents.firstIndex(where: {
                $0.toOpaque() == Unmanaged.passUnretained(dependent).toOpaque()
            }) {
                dependency.graphDependents.remove(at: index)
            }
            if tracked {
                uncount = dependency.withLocked { state -> Bool in
                    // Not in the list: its finish took it (and decrements),
                    // or registration failed (already uncounted).
                    guard let index = state.dependents.firstIndex(where: {
                        $0.toOpaque() == Unmanaged.passUnretained(dependent).toOpaque()
                    }) else { return false }
                    state.dependents.remove(at: index)
                    return true
                }
            }
        }
        if uncount {
            dependent.dependencyDidFinish()
        }
        return removed
    }

    /// A procedure with dependencies is being deinitialised: it leaves the
    /// reverse edges of the dependencies that have not finished.
    static func procedureWillDeinit(_ procedure: Procedure) {
        let id = Unmanaged.passUnretained(procedure).toOpaque()
        procedureGraphLock.withLock {
            let dependencies = procedure.withLocked { $0.dependencies }
            for dependency in dependencies where !dependency.graphDependents.isEmpty {
                if let index = dependency.graphDependents.firstIndex(where: { $0.toOpaque() == id }) {
                    dependency.graphDependents.remove(at: index)
                }
            }
        }
    }

    /// A procedure that others depended on finished: it leaves the graph.
    static func procedureDidFinish(_ procedure: Procedure) {
        procedureGraphLock.withLock {
            procedure.graphDependents = []
        }
    }

    /// The unfinished procedures that wait for `node` (under the graph lock;
    /// unretained: alive because they cannot deinit without this lock).
    private static func liveDependents(of node: Unmanaged<Procedure>) -> [Unmanaged<Procedure>] {
        node._withUnsafeGuaranteedRef { procedure in
            procedure.graphDependents.filter { dependent in
                dependent._withUnsafeGuaranteedRef { !$0.isFinished }
            }
        }
    }

    /// The unfinished procedures `node` waits for.
    private static func liveDependencies(of node: Unmanaged<Procedure>) -> [Unmanaged<Procedure>] {
        node._withUnsafeGuaranteedRef { procedure in
            procedure.withLocked { state in
                state.dependencies.compactMap { $0.isFinished ? nil : Unmanaged.passUnretained($0) }
            }
        }
    }

    @inline(__always)
    private static func order(_ node: Unmanaged<Procedure>) -> Int {
        node._withUnsafeGuaranteedRef { $0.graphOrder }
    }

    /// Pearce–Kelly for the edge "`dependent` waits for `dependency`" when
    /// `dependency.graphOrder > dependent.graphOrder`. Under the graph lock.
    private static func reorder(dependent: Procedure, dependency: Procedure) {
        let lower = dependent.graphOrder
        let upper = dependency.graphOrder
        let dependentNode = Unmanaged.passUnretained(dependent)
        let dependencyNode = Unmanaged.passUnretained(dependency)

        // The common cases, in O(1): when nothing waits for `dependent`, it
        // can move above everything (a fan-in's sink created before its
        // sources); when `dependency` waits for nothing, it can move below
        // everything. Orders need not be dense, only increasing along
        // "waits for".
        if liveDependents(of: dependentNode).isEmpty {
            dependent.graphOrder = nextSerial()
            return
        }
        if liveDependencies(of: dependencyNode).isEmpty {
            dependency.graphOrder = -nextSerial()
            return
        }

        // Forward: who waits (transitively) for `dependent`, up to `upper`.
        // Reaching `dependency` means it already waits for `dependent`.
        var forward: [Unmanaged<Procedure>] = [dependentNode]
        var parent: [UnsafeMutableRawPointer: Unmanaged<Procedure>] = [:]
        var seen: Set<UnsafeMutableRawPointer> = [dependentNode.toOpaque()]
        var stack: [Unmanaged<Procedure>] = [dependentNode]
        while let node = stack.popLast() {
            for next in liveDependents(of: node) where order(next) <= upper {
                let id = next.toOpaque()
                if seen.contains(id) { continue }
                seen.insert(id)
                parent[id] = node
                if id == dependencyNode.toOpaque() {
                    reportCycle(dependent: dependentNode, dependency: dependencyNode, parent: parent)
                }
                forward.append(next)
                stack.append(next)
            }
        }

        // Backward: what `dependency` waits for (transitively), down to `lower`.
        var backward: [Unmanaged<Procedure>] = [dependencyNode]
        seen = [dependencyNode.toOpaque()]
        stack = [dependencyNode]
        while let node = stack.popLast() {
            for next in liveDependencies(of: node) where order(next) >= lower {
                let id = next.toOpaque()
                if seen.contains(id) { continue }
                seen.insert(id)
                backward.append(next)
                stack.append(next)
            }
        }

        // Renumber: the backward set (in order) takes the smallest orders of
        // the pooled region, the forward set the rest.
        backward.sort { order($0) < order($1) }
        forward.sort { order($0) < order($1) }
        let orders = (backward.map(order) + forward.map(order)).sorted()
        for (node, value) in zip(backward + forward, orders) {
            node._withUnsafeGuaranteedRef { $0.graphOrder = value }
        }
    }

    /// Stops the process naming the cycle "dependent waits for dependency,
    /// which waits for ..., which waits for dependent".
    private static func reportCycle(dependent: Unmanaged<Procedure>, dependency: Unmanaged<Procedure>,
                                    parent: [UnsafeMutableRawPointer: Unmanaged<Procedure>]) -> Never {
        // parent links run from `dependency` back to `dependent`: a node
        // waits for its parent.
        var path: [Unmanaged<Procedure>] = [dependent, dependency]
        var node = dependency
        while let up = parent[node.toOpaque()], up.toOpaque() != dependent.toOpaque() {
            path.append(up)
            node = up
        }
        path.append(dependent)
        let names = path.map { node in node._withUnsafeGuaranteedRef { $0.description } }
            .joined(separator: " -> ")
        procedureMisuse("Procedure.addDependency: dependency cycle: \(names) "
            + "(each waits for the next; \(path.count - 1) procedures would never run)")
    }
}
