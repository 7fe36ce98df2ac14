;; wat-labels: a node_labels plugin written by hand in WebAssembly text, to show that ABI v1
;; needs no SDK and no particular language. It labels every node
;; node.hcloud.example/plugin-language=wat.
;;
;; Build: wat2wasm labels.wat -o labels.wasm   (Debian package wabt)
(module
  ;; ABI v1: the module exports its memory.
  (memory (export "memory") 1)

  ;; A bump allocator: ccm_alloc hands out memory from $heap upwards.
  (global $heap (mut i32) (i32.const 1024))

  ;; The reply, a constant: 56 bytes at offset 16.
  (data (i32.const 16) "{\"labels\":{\"node.hcloud.example/plugin-language\":\"wat\"}}")

  ;; ccm_abi_version() -> i32: this module implements ABI version 1.
  (func (export "ccm_abi_version") (result i32) (i32.const 1))

  ;; ccm_alloc(len) -> ptr: a buffer of len bytes, valid until ccm_free; grows memory as needed.
  (func (export "ccm_alloc") (param $len i32) (result i32)
    (local $ptr i32)
    (local $end i32)
    (local.set $ptr (global.get $heap))
    (local.set $end (i32.add (local.get $ptr) (local.get $len)))
    (if (i32.gt_u (local.get $end) (i32.mul (memory.size) (i32.const 65536)))
      (then
        (if (i32.eq (memory.grow (i32.add (i32.shr_u (i32.sub (local.get $end) (i32.mul (memory.size) (i32.const 65536))) (i32.const 16)) (i32.const 1)))
                    (i32.const -1))
          (then unreachable))))
    (global.set $heap (local.get $end))
    (local.get $ptr))

  ;; ccm_free(ptr, len): every buffer is released when the hook returns, so nothing to do.
  (func (export "ccm_free") (param i32 i32))

  ;; ccm_node_labels(ptr, len) -> i64: the request JSON is at ptr (ignored here); the result
  ;; packs the reply's pointer in the high 32 bits and its length in the low 32 bits.
  (func (export "ccm_node_labels") (param $ptr i32) (param $len i32) (result i64)
    (global.set $heap (i32.const 1024)) ;; the request's buffer is not needed any more
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 56))))
