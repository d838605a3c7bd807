"""The jvp kind: forward-mode JVPs (ForwardAccumulator) against reverse-mode VJPs through
⟨u, Jv⟩ = ⟨Jᵀu, v⟩."""
