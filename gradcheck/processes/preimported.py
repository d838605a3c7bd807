"""Importing this module imports TensorFlow and gradcheck's checks without running a TensorFlow
op: the fork server that gradcheck.processes.supervisor forks its workers from imports it
(multiprocessing's preloading takes module names), so each worker starts with TensorFlow already
loaded."""

import contextlib

from gradcheck.pipeline import preimport

# A failure here is the worker's to report, when it imports the same modules itself.
with contextlib.suppress(BaseException):
    preimport()
