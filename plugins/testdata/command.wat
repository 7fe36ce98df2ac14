;; A WASI command, as Go builds a plugin without -buildmode=c-shared: _start and the hooks,
;; no _initialize. The hooks would trap ("unreachable") since _start never ran.
(module
  (memory (export "memory") 1 1)
  (func (export "_start"))
  (func (export "ccm_abi_version") (result i32) (i32.const 1))
  (func (export "ccm_alloc") (param i32) (result i32) (unreachable))
  (func (export "ccm_free") (param i32 i32))
  (func (export "ccm_node_labels") (param i32 i32) (result i64) (unreachable)))
