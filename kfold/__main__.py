import sys

from kfold.cli import main

sys.exit(main())
