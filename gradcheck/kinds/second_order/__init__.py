"""The second-order kind (--order 2): the derivative of f's VJP by nested tapes against central
differences of it, and its symmetry; the hessian kind reuses it."""
