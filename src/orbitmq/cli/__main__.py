import sys

from orbitmq.cli.main import main

sys.exit(main())
