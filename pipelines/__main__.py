import sys

from pond.pipelines.cli import main

sys.exit(main())
