/** A multipart/form-data body built in memory, for the load generator and the runner's checks. */

/** A text part or a file part. */
export type FormPart = { name: string; value: string } | { name: string; fileName: string; contentType: string; data: Buffer };

/** A built body and the Content-Type header that goes with it. */
export interface MultipartBody {
  body: Buffer;
  contentType: string;
}

/** The body and its Content-Type (with a fixed boundary, so every request is byte-identical). */
export function buildMultipart(parts: readonly FormPart[]): MultipartBody {
  const boundary = '----recordbase-bench-boundary-7d1f0e';
  const chunks: Buffer[] = [];
  for (const part of parts) {
    if ('value' in part) {
      chunks.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${part.name}"\r\n\r\n${part.value}\r\n`));
    } else {
      chunks.push(
        Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${part.name}"; filename="${part.fileName}"\r\nContent-Type: ${part.contentType}\r\n\r\n`),
        part.data,
        Buffer.from('\r\n'),
      );
    }
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { body: Buffer.concat(chunks), contentType: `multipart/form-data; boundary=${boundary}` };
}
