# Hugging Face Docker Space: runs the app as uid 1000 on port 7860 with the embedded models.
# Base image: pin it by digest when you build (FROM python:3.11-slim@sha256:<digest> from `docker pull` /
# `docker buildx imagetools inspect python:3.11-slim`); this repository's machines reach no image registry, so no
# digest could be resolved and written here.
FROM python:3.11-slim
RUN useradd -m -u 1000 user
ENV PYTHONUNBUFFERED=1 GRADIO_SERVER_NAME=0.0.0.0 GRADIO_SERVER_PORT=7860
WORKDIR /app
COPY requirements.txt .
# Installed as root into the system site-packages. Every requirement is pinned with == (requirements.txt); torch
# comes from the CPU wheel index, because a bare torch pin would pull the multi-GB CUDA build from PyPI.
RUN pip install --no-cache-dir torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu \
 && pip install --no-cache-dir -r requirements.txt
# The app's files belong to root and are read-only to everyone: the runtime user cannot rewrite the code it runs.
COPY . .
RUN chmod -R a-w /app
USER user
ENV HOME=/home/user UNMASK_CACHE_DIR=/home/user/.cache/unmask
EXPOSE 7860
CMD ["python", "app.py"]
