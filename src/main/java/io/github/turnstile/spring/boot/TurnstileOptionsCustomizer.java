package io.github.turnstile.spring.boot;

import io.github.turnstile.TurnstileOptions;

/**
 * Adjusts the options of the auto-configured {@link io.github.turnstile.Turnstile} after the
 * {@code turnstile.*} properties are applied. Every bean of this type is called, in
 * {@link org.springframework.core.annotation.Order @Order}, before the Turnstile connects.
 *
 * <pre>{@code
 * @Bean
 * TurnstileOptionsCustomizer shortLeases() {
 *   return options -> options.leaseTime(Duration.ofSeconds(10));
 * }
 * }</pre>
 *
 * <p>Beans of type {@link io.github.turnstile.LeaseLossListener} need no customizer: they are
 * registered with the Turnstile as they are.
 */
@FunctionalInterface
public interface TurnstileOptionsCustomizer {

  /**
   * Adjusts the options about to be built.
   *
   * @param options the builder, holding the defaults and the {@code turnstile.*} properties
   */
  void customize(TurnstileOptions.Builder options);
}
