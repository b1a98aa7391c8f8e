"""Every part of PyTorch's mutation/aliasing corpus, in one tuple, for the test files that run all of it.

Input: the corpus parts (tests/pipeline/corpus_pytorch*.py). Output: `ALL`, read by tests/pipeline/test_corpus_pytorch.py
(the direct entry) and test_dynamo_corpus.py (torch.compile(backend="subclassaot")).
Invariants: a new part is added here once, and so reaches both entries.
"""

from __future__ import annotations

from tests.pipeline.corpus_pytorch import CASES
from tests.pipeline.corpus_pytorch2 import CASES2
from tests.pipeline.corpus_pytorch3 import CASES3
from tests.pipeline.corpus_pytorch4 import CASES4
from tests.pipeline.corpus_pytorch5 import CASES5
from tests.pipeline.corpus_pytorch6 import CASES6
from tests.pipeline.corpus_pytorch7 import CASES7
from tests.pipeline.corpus_pytorch8 import CASES8
from tests.pipeline.corpus_pytorch9 import CASES9
from tests.pipeline.corpus_pytorch10 import CASES10
from tests.pipeline.corpus_pytorch11 import CASES11
from tests.pipeline.corpus_pytorch12 import CASES12
from tests.pipeline.corpus_pytorch13 import CASES13
from tests.pipeline.corpus_pytorch14 import CASES14
from tests.pipeline.corpus_pytorch15 import CASES15
from tests.pipeline.corpus_pytorch16 import CASES16
from tests.pipeline.corpus_pytorch17 import CASES17
from tests.pipeline.corpus_pytorch_subclass import MODULE_CASES, SUBCLASS_CASES

ALL = (
    CASES
    + SUBCLASS_CASES
    + MODULE_CASES
    + CASES2
    + CASES3
    + CASES4
    + CASES5
    + CASES6
    + CASES7
    + CASES8
    + CASES9
    + CASES10
    + CASES11
    + CASES12
    + CASES13
    + CASES14
    + CASES15
    + CASES16
    + CASES17
)
