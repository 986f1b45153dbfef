"""The numpy array types the formulas pass around, named once: FloatArray (float64 grids of seconds, bytes,
rates) and IntArray (int64 grids of tokens, sequences, blocks)."""

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
