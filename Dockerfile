# attnscope: the web app with the bundled English->German model, on the CPU by default.
#   docker build -t attnscope .
#   docker run --rm -p 8000:8000 attnscope
# GPU variant (NVIDIA Container Toolkit on the host):
#   docker build -t attnscope:cuda --build-arg TORCH_INDEX=https://download.pytorch.org/whl/cu128 .
#   docker run --rm --gpus all -p 8000:8000 attnscope:cuda
FROM python:3.11-slim

ARG TORCH_VERSION=2.13.0
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    ATTNSCOPE_HOST=0.0.0.0 \
    ATTNSCOPE_PORT=8000 \
    ATTNSCOPE_DEVICE=auto

RUN useradd --create-home --uid 10001 attnscope
WORKDIR /app

# torch first and from its own index, so the CPU image does not pull CUDA wheels.
RUN pip install "torch==${TORCH_VERSION}" --index-url "${TORCH_INDEX}"

COPY pyproject.toml README.md ./
COPY app ./app
COPY model ./model
COPY static ./static
COPY templates ./templates
RUN pip install -e . && chown -R attnscope:attnscope /app

USER 10001
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request,sys; r=urllib.request.urlopen('http://127.0.0.1:8000/api/health', timeout=4); sys.exit(0 if r.status == 200 else 1)"]
CMD ["attnscope", "serve", "--host", "0.0.0.0", "--port", "8000"]
