package dev.ebb;

import java.util.Map;

/** The README's example (java_jar_test runs it from the jar alone): java -cp ebb.jar:. dev.ebb.Example MODEL */
public final class Example {
  public static void main(String[] args) {
    try (Runtime runtime = Runtime.create();
         Session session = runtime.load(args.length > 0 ? args[0] : "models/convnet/model.onnx");
         Tensor x = Tensor.fromArray(new float[3 * 64 * 64], 1, 3, 64, 64);
         Outputs out = session.run(Map.of("x", x))) {          // one operation: the arena goes back at its end
      float[] y = out.get("y").toFloatArray();
      System.out.println("ebb " + Runtime.version() + ": y has " + y.length + " values, shared arena "
                         + runtime.memory().arena("cpu:shared").orElseThrow().reserved() + " bytes reserved");
    }
  }
}
