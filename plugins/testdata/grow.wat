;; Both hooks grow memory by one page per call and trap when refused: with a small memory limit
;; only the host's recycling of grown instances keeps calls succeeding.
(module
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 1024))
  (func (export "ccm_abi_version") (result i32) (i32.const 1))
  (func $alloc (export "ccm_alloc") (param $n i32) (result i32)
    (local $p i32)
    (local.set $p (global.get $heap))
    (global.set $heap (i32.add (global.get $heap) (local.get $n)))
    (local.get $p))
  (func (export "ccm_free") (param i32 i32))
  (data (i32.const 512) "{\"name\":\"grown\"}")
  (func (export "ccm_lb_name") (param i32 i32) (result i64)
    (global.set $heap (i32.const 1024))
    (if (i32.eq (memory.grow (i32.const 1)) (i32.const -1)) (then unreachable))
    (i64.or (i64.shl (i64.const 512) (i64.const 32)) (i64.const 16))))
