# The browser bundle (CodeMirror + Loro co-editor) from the committed lockfile.
FROM node:20-slim AS assets
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY static ./static
RUN node static/js/build.mjs

FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 DJANGO_SETTINGS_MODULE=pattern_site.settings.production
WORKDIR /app
COPY pyproject.toml constraints.txt ./
COPY . .
COPY --from=assets /app/static/dist ./static/dist
RUN pip install --no-cache-dir -c constraints.txt . \
 && PATTERN_SECRET_KEY=build python manage.py collectstatic --noinput
EXPOSE 8000
CMD ["daphne", "-b", "0.0.0.0", "-p", "8000", "pattern_site.asgi:application"]
