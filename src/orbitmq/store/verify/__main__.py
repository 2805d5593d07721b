"""``python -m orbitmq.store.verify DIR`` (see :mod:`orbitmq.store.verify`)."""

import sys

from orbitmq.store.verify import main

sys.exit(main())
