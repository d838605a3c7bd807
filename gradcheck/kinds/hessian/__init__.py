"""The hessian kind (`gradcheck hessian`): the Hessian of a scalar f, block by block, by the
second-order kind's machinery with u = 1."""
