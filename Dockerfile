# One image for every service of docker-compose.yml: migrate, api, worker and dashboard differ
# only in their command (`grposcope migrate | serve | worker | dashboard`).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

# No torch: the server never trains (torch, transformers and trl are only the `demo` extra).
# Dependencies before sources, so editing code does not reinstall them: install both
# distributions from stub packages, then drop the stubs.
COPY pyproject.toml README.md ./
COPY trainer_plugin/pyproject.toml trainer_plugin/pyproject.toml
RUN mkdir -p backend/grposcope frontend/grposcope_dashboard trainer_plugin/grposcope_trainer \
    && touch backend/grposcope/__init__.py frontend/grposcope_dashboard/__init__.py \
             trainer_plugin/grposcope_trainer/__init__.py \
    && pip install ./trainer_plugin . && pip uninstall -y grposcope grposcope-trainer

COPY backend backend
COPY frontend frontend
COPY trainer_plugin trainer_plugin
# A regular (wheel) install: the Alembic scripts are package data of grposcope
# (grposcope/migrations), so nothing is read from the source tree at run time.
RUN pip install --no-deps ./trainer_plugin . && rm -rf backend frontend trainer_plugin \
    && grposcope --help > /dev/null

RUN useradd --create-home --uid 10001 grposcope
USER grposcope

# 8000: the API (`serve`); 8050: the dashboard (`dashboard`). Workers listen on nothing.
EXPOSE 8000 8050
CMD ["grposcope", "serve", "--host", "0.0.0.0", "--port", "8000"]
