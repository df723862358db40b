;; A valid core WebAssembly module, not a component: the host must refuse it
;; as a plugin. It even exports a function named like the shape interface's.
(module
  (memory (export "memory") 1)
  (func (export "faultline:plugin/shape@0.1.0#next-ops") (param i32 i32) (result i32)
    i32.const 0))
