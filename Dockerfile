# One image for every service of docker-compose.yml: migrate, api, worker and dashboard differ
# only in their command (`grposcope migrate | serve | worker | dashboard`).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

# CPU torch first, from PyTorch's own index: the default index would pull a multi-GB CUDA build
# (the server never trains; torch is only needed by `grposcope demo`'s tiny GRPO run).
RUN pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu

# Dependencies before sources, so editing code does not reinstall them.
COPY pyproject.toml README.md ./
COPY trainer_plugin/pyproject.toml trainer_plugin/pyproject.toml
RUN mkdir -p backend/grposcope frontend/grposcope_dashboard trainer_plugin/grposcope_trainer \
    && touch backend/grposcope/__init__.py frontend/grposcope_dashboard/__init__.py \
             trainer_plugin/grposcope_trainer/__init__.py \
    && pip install . && pip uninstall -y grposcope

COPY backend backend
COPY frontend frontend
COPY trainer_plugin trainer_plugin
COPY migrations migrations
# Editable on purpose: the Alembic scripts are found relative to the source tree
# (grposcope/db.py: MIGRATIONS_DIR = <repo>/migrations), which a wheel install would not keep.
RUN pip install --no-deps -e . && grposcope --help > /dev/null

RUN useradd --create-home --uid 10001 grposcope
USER grposcope

# 8000: the API (`serve`); 8050: the dashboard (`dashboard`). Workers listen on nothing.
EXPOSE 8000 8050
CMD ["grposcope", "serve", "--host", "0.0.0.0", "--port", "8000"]
