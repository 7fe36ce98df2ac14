;; Both hooks write one byte to stderr 10,000 times through WASI fd_write, then reply well: the
;; host must bound the log records per plugin over time, not per instance or per byte.
(module
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1 1)
  (global $heap (mut i32) (i32.const 1024))
  (func (export "ccm_abi_version") (result i32) (i32.const 1))
  (func $alloc (export "ccm_alloc") (param $n i32) (result i32)
    (local $p i32)
    (local.set $p (global.get $heap))
    (global.set $heap (i32.add (global.get $heap) (local.get $n)))
    (local.get $p))
  (func (export "ccm_free") (param i32 i32))
  ;; the byte 'x' at 8, one iovec at 0: {ptr=8, len=1}; nwritten at 12
  (data (i32.const 8) "x")
  (data (i32.const 16) "{\"labels\":{}}")
  (data (i32.const 512) "{\"name\":\"chatty\"}")
  (func $chat
    (local $i i32)
    (i32.store (i32.const 0) (i32.const 8))
    (i32.store (i32.const 4) (i32.const 1))
    (loop $next
      (drop (call $fd_write (i32.const 2) (i32.const 0) (i32.const 1) (i32.const 12)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $next (i32.lt_u (local.get $i) (i32.const 10000)))))
  (func (export "ccm_node_labels") (param i32 i32) (result i64)
    (global.set $heap (i32.const 1024))
    (call $chat)
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 13)))
  (func (export "ccm_lb_name") (param i32 i32) (result i64)
    (global.set $heap (i32.const 1024))
    (call $chat)
    (i64.or (i64.shl (i64.const 512) (i64.const 32)) (i64.const 17))))
