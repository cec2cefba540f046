"""Run the pages' claims on other torch releases: `make test-versions` (python -m versions)."""
