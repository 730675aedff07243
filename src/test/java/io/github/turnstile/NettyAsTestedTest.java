package io.github.turnstile;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * A user of the artifact got the Netty that Lettuce declares (4.2.13.Final with Lettuce
 * 7.7.0) while the build pinned and tested 4.2.16.Final. The pom now declares the Netty modules
 * Lettuce uses at the tested version, so that a user gets what the tests run on. This test keeps
 * it so: the tests run on netty.version only, and the pom declares at that version every Netty
 * module that Lettuce itself declares (a Lettuce upgrade that adds one fails here until it is
 * declared too).
 */
class NettyAsTestedTest {
  private static final Pattern DEPENDENCY = Pattern.compile("<dependency>(.*?)</dependency>", Pattern.DOTALL);

  @Test
  void theTestsRunOnTheDeclaredNetty() throws IOException {
    String pom = Files.readString(Paths.get("pom.xml"), StandardCharsets.UTF_8);
    String tested = tag(pom, "netty.version");
    Map<String, String> onClasspath = new TreeMap<>();
    io.netty.util.Version.identify().forEach((artifact, v) -> onClasspath.put(artifact, v.artifactVersion()));
    assertFalse(onClasspath.isEmpty());
    for (Map.Entry<String, String> e : onClasspath.entrySet()) {
      assertEquals(tested, e.getValue(), e.getKey() + " on the test classpath: " + onClasspath);
    }

    String lettucePom;
    try (InputStream in = io.lettuce.core.RedisClient.class.getResourceAsStream(
        "/META-INF/maven/io.lettuce/lettuce-core/pom.xml")) {
      assertNotNull(in, "Lettuce's pom inside its jar");
      lettucePom = new String(in.readAllBytes(), StandardCharsets.UTF_8);
    }
    Set<String> lettuceNetty = nettyModules(lettucePom, false);
    assertTrue(lettuceNetty.contains("netty-handler"), lettuceNetty.toString());
    String mainDependencies = pom.substring(pom.indexOf("</dependencyManagement>"), pom.indexOf("<!-- test scope only -->"));
    Set<String> declared = nettyModules(mainDependencies, true);
    assertEquals(lettuceNetty, declared,
        "the Netty modules Lettuce declares (non-optional), declared by Turnstile at ${netty.version}");
  }

  /** Non-optional, non-test io.netty dependencies; {@code ours}: only those at ${netty.version}. */
  private static Set<String> nettyModules(String pom, boolean ours) {
    Set<String> modules = new TreeSet<>();
    Matcher m = DEPENDENCY.matcher(pom);
    while (m.find()) {
      String d = m.group(1);
      if (!d.contains("<groupId>io.netty</groupId>") || d.contains("<optional>true</optional>")
          || d.contains("<scope>test</scope>") || d.contains("<scope>runtime</scope>")) {
        continue;
      }
      if (ours && !d.contains("<version>${netty.version}</version>")) {
        continue;
      }
      modules.add(tag(d, "artifactId"));
    }
    return modules;
  }

  private static String tag(String xml, String name) {
    int from = xml.indexOf("<" + name + ">") + name.length() + 2;
    return xml.substring(from, xml.indexOf("</" + name + ">", from)).trim();
  }
}
