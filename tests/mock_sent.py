#!/usr/bin/env python3
"""Says whether each given text occurs in what the scripted model (tests/mock_llm.py on
127.0.0.1:57411) has received so far: for pg_regress suites, through psql's \\!."""
import json
import sys
import urllib.request

with urllib.request.urlopen("http://127.0.0.1:57411/requests", timeout=5) as r:
    sent = json.dumps(json.load(r), ensure_ascii=False)
for text in sys.argv[1:]:
    print(f"{text} sent: {'yes' if text in sent else 'no'}")
