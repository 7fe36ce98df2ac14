;; ccm_free is missing.
(module
  (memory (export "memory") 1 1)
  (global $heap (mut i32) (i32.const 1024))
  (func (export "ccm_abi_version") (result i32) (i32.const 1))
  (func (export "ccm_alloc") (param i32) (result i32) (i32.const 1024))
  (data (i32.const 16) "{\"labels\":{}}")
  (data (i32.const 512) "{\"name\":\"x\"}")
  (func (export "ccm_node_labels") (param i32 i32) (result i64)
    (global.set $heap (i32.const 1024))
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 13)))
  (func (export "ccm_lb_name") (param i32 i32) (result i64)
    (global.set $heap (i32.const 1024))
    (i64.or (i64.shl (i64.const 512) (i64.const 32)) (i64.const 12))))
