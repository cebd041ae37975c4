// WorkDeadline: the Duration arithmetic (saturating), wall-clock deadlines,
// raw values.

import Testing
import SwiftQueues

@Suite struct WorkDeadlineTests {
    @Test func arithmeticWithDurations() {
        let now = WorkDeadline.now()
        let later = now + .seconds(3)
        #expect(later.rawValue - now.rawValue == 3_000_000_000)
        #expect(later - .seconds(3) == now)
        #expect(now + .milliseconds(5) > now)
        #expect(now + .nanoseconds(-1) < now)
        #expect((now + .microseconds(7)).rawValue - now.rawValue == 7_000)
        var moving = now
        moving += .milliseconds(2)
        moving -= .milliseconds(1)
        #expect(moving.rawValue - now.rawValue == 1_000_000)
        #expect(WorkDeadline.now() >= now)
        #expect(!now.isWallClock)
    }

    @Test func arithmeticSaturates() {
        let now = WorkDeadline.now()
        #expect(WorkDeadline.distantFuture + .seconds(1) == .distantFuture)
        #expect(WorkDeadline.distantFuture - .seconds(1) == .distantFuture)
        #expect(now + .seconds(Int64.max) == .distantFuture)
        #expect(now - .seconds(Int64.min) == .distantFuture)
        #expect((now - .seconds(Int64.max)).rawValue <= now.rawValue)
        #expect(now < .distantFuture)
        #expect(WorkDeadline.distantFuture.description == "WorkDeadline.distantFuture")
    }

    @Test func wallClockDeadlines() {
        let wall = WorkDeadline.wallNow()
        #expect(wall.isWallClock)
        #expect(wall > WorkDeadline.now())  // every wall deadline sorts after monotonic ones
        let epoch = WorkDeadline.wallClock(sinceEpoch: .zero)
        #expect(epoch.isWallClock)
        let fromComponents = WorkDeadline.wallClock(sinceEpoch: .seconds(1_700_000_000) + .nanoseconds(5))
        #expect(fromComponents.rawValue - epoch.rawValue == 1_700_000_000_000_000_005)
        #expect(WorkDeadline.wallClock(sinceEpoch: .seconds(-5)) == epoch)
        #expect((wall + .seconds(1)).rawValue - wall.rawValue == 1_000_000_000)
        // A wall-clock timeout works like a monotonic one.
        #expect(CountingSemaphore(value: 0).wait(timeout: .wallNow() + .milliseconds(5)) == .timedOut)
    }

    @Test func rawValueRoundTrips() {
        let deadline = WorkDeadline.now() + .seconds(1)
        #expect(WorkDeadline(rawValue: deadline.rawValue) == deadline)
        #expect(WorkDeadline.distantFuture.rawValue == UInt64.max)
    }
}
