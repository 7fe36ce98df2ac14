;; Both hooks write 100 KiB to stderr through WASI fd_write, then trap: the host must cap the
;; output and survive.
(module
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 3 3)
  (global $heap (mut i32) (i32.const 1024))
  (func (export "ccm_abi_version") (result i32) (i32.const 1))
  (func $alloc (export "ccm_alloc") (param $n i32) (result i32)
    (local $p i32)
    (local.set $p (global.get $heap))
    (global.set $heap (i32.add (global.get $heap) (local.get $n)))
    (local.get $p))
  (func (export "ccm_free") (param i32 i32))
  (func $spam
    ;; 100 KiB of 'x' at 65536, described by one iovec at 16: {ptr=65536, len=102400}
    (memory.fill (i32.const 65536) (i32.const 120) (i32.const 102400))
    (i32.store (i32.const 16) (i32.const 65536))
    (i32.store (i32.const 20) (i32.const 102400))
    (drop (call $fd_write (i32.const 2) (i32.const 16) (i32.const 1) (i32.const 32))))
  (func (export "ccm_node_labels") (param i32 i32) (result i64)
    (global.set $heap (i32.const 1024))
    (call $spam)
    unreachable)
  (func (export "ccm_lb_name") (param i32 i32) (result i64)
    (global.set $heap (i32.const 1024))
    (call $spam)
    unreachable))
