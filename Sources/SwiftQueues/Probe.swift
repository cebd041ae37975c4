import CRuntime
func _probe() -> Int64 { var x: Int64 = 0; _ = sq_atomic_inc64(&x); var l = sq_spinlock_t(); sq_spinlock_lock(&l); sq_spinlock_unlock(&l); return x }
