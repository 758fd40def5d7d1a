// The API's JSON is snake_case; the client's objects are camelCase, converted at the boundary.

type CamelCase<S extends string> = S extends `${infer Head}_${infer Tail}`
  ? `${Head}${Capitalize<CamelCase<Tail>>}`
  : S;

/** `T` with every snake_case key camelCase, deeply. */
export type Camelize<T> = T extends readonly (infer Item)[]
  ? Camelize<Item>[]
  : T extends object
    ? { [K in keyof T as K extends string ? CamelCase<K> : K]: Camelize<T[K]> }
    : T;

const SNAKE = /^[a-z][a-z0-9]*(?:_[a-z0-9]+)+$/;

function camelKey(key: string): string {
  return SNAKE.test(key) ? key.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase()) : key;
}

function snakeKey(key: string): string {
  return key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

function mapKeys(value: unknown, rename: (key: string) => string): unknown {
  if (Array.isArray(value)) return value.map((item) => mapKeys(item, rename));
  if (typeof value !== "object" || value === null) return value;
  return Object.fromEntries(
    Object.entries(value).map(([key, item]) => [rename(key), mapKeys(item, rename)]),
  );
}

export function camelize<T>(value: T): Camelize<T> {
  return mapKeys(value, camelKey) as Camelize<T>;
}

/** The API's snake_case keys of a camelCase request object, deeply. */
export function snakeize(value: unknown): unknown {
  return mapKeys(value, snakeKey);
}
