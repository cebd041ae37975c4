//===----------------------------------------------------------------------===//
//
// SwiftQueues — the heap node shared by LockFreeStack and LockFreeQueue.
//
//===----------------------------------------------------------------------===//

import CSwiftQueues

/// The C runtime's intrusive links; `init()` is the all-zero (NULL) link.
internal protocol _LockFreeLink { init() }
extension sq_lifo_node_t: _LockFreeLink {}
extension sq_fifo_node_t: _LockFreeLink {}

/// The heap node of a LockFreeStack / LockFreeQueue, one allocation per
/// element: the C runtime's link at offset 0 (so the `offset` argument of
/// the C calls is always 0), then the element at the first offset its
/// alignment allows. The C push and pop are full barriers and announce the
/// hand-off to ThreadSanitizer themselves, so the node needs nothing more.
internal enum _LockFreeNode<Link: _LockFreeLink, Element> {
    /// Where the link sits inside a node (the `offset` the C calls take).
    static var linkOffset: Int { 0 }

    /// Where the element sits inside a node.
    @inline(__always)
    static var elementOffset: Int {
        let align = MemoryLayout<Element>.alignment
        return (MemoryLayout<Link>.size + align - 1) & ~(align - 1)
    }

    @inline(__always)
    static var alignment: Int {
        Swift.max(MemoryLayout<Link>.alignment, MemoryLayout<Element>.alignment)
    }

    /// Allocates a node holding `element`; returns its address (the link's).
    static func make(_ element: consuming Element) -> UnsafeMutableRawPointer {
        let node = UnsafeMutableRawPointer.allocate(
            byteCount: elementOffset + MemoryLayout<Element>.size, alignment: alignment)
        node.initializeMemory(as: Link.self, repeating: Link(), count: 1)
        (node + elementOffset).initializeMemory(as: Element.self, to: element)
        return node
    }

    /// Moves the element out of `node` and frees the node.
    static func take(_ node: UnsafeMutableRawPointer) -> Element {
        let element = (node + elementOffset).assumingMemoryBound(to: Element.self).move()
        node.assumingMemoryBound(to: Link.self).deinitialize(count: 1)
        node.deallocate()
        return element
    }
}
