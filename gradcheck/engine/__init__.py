"""The engine: f bound to its inputs, evaluated, differentiated and observed (TensorFlow's
runtime, imported lazily by engine/runtime.py, the bound program, the recorded gradients, the
instrumented custom gradients). Imports nothing here: `gradcheck --help` never loads TensorFlow."""
