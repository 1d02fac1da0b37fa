from tdescope.cli import main

raise SystemExit(main())
